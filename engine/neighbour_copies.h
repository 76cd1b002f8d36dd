// The ranks' side of in-memory checkpoint copies (ckpt/memory_copies.h):
// after a committed save each rank copies its files into its node's memory
// folder and, on several nodes, sends them to its neighbour, the rank with
// its LOCAL_RANK on the next node (world rank r + L mod W, L ranks per
// node), keeping the previous node's in return. Before a load, a rank whose
// own copy is gone (its node was replaced) gets it back from that neighbour.
// Internal to zt_engine.
//
// Contract
//  - Every method is collective over the world group and must be called by
//    every rank in the same order (the engine's saves and loads are); which
//    transfers happen is decided from an all-reduce of every rank's facts,
//    so all ranks agree on it.
//  - Transfers run over two-rank sub-groups (one per neighbouring pair,
//    made on first use); each rank runs its (at most two) transfers in the
//    order of the sending rank, one total order for all ranks, so no cycle
//    of ranks can wait on each other.
//  - KeepSaved makes the copy and runs the exchange on a thread of its own
//    (the training thread only makes the pair groups, once): copying a
//    rank's shards into tmpfs took 1.2 s per GiB here, which a save should
//    not stall for. The next BeforeSave, KeepSaved or FetchMissing, and the
//    destructor, wait for it; until it is done the new copy does not
//    exist (a restart then reads the disk for it).
//  - A problem on this rank's side (tmpfs full, a file that cannot be
//    read) leaves this rank without a copy and is logged as a warning: the
//    save on disk stands, and a restart without the copy reads the disk. A
//    failed transfer is an error of the pair's group.
//  - The pair groups are made once, and every rank agrees they were: where
//    any rank could not make its pairs, copies stay off on every rank.
//  - One node (W <= L): no neighbours; the node's own copies are all there
//    is, and FetchMissing has nothing to do.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ckpt/memory_copies.h"
#include "comm/process_group.h"

namespace zt {

class NeighbourCopies {
 public:
  // `local_world`: ranks per node (LOCAL_WORLD_SIZE).
  NeighbourCopies(comm::ProcessGroup& world, int local_world, ckpt::MemoryCopies memory);
  ~NeighbourCopies();
  NeighbourCopies(const NeighbourCopies&) = delete;
  NeighbourCopies& operator=(const NeighbourCopies&) = delete;

  const ckpt::MemoryCopies& memory() const { return memory_; }
  // Whether the world spans several nodes of `local_world` ranks.
  bool several_nodes() const;

  // Local, before a save of `tag`: a copy of that tag would be stale once
  // the save lands, so it goes now.
  void BeforeSave(const std::string& tag);
  // After save `tag` committed: this rank's files (`own`, names in
  // `folder`) into memory, and the neighbour exchange, started in the
  // background (see above); an error only where the pair groups could not
  // be made.
  // `dir`: the save directory, as ckpt::CanonicalSaveDir gives it.
  absl::Status KeepSaved(const std::string& folder, const std::string& dir, const std::string& tag,
                         const std::vector<std::string>& own);
  // Waits for the copy KeepSaved started; its outcome (already logged).
  absl::Status Wait();
  // Before a load of `tag` ("" when this rank could not tell which: it
  // still takes part). Returns how many files this rank received.
  absl::StatusOr<int> FetchMissing(const std::string& dir, const std::string& tag);

 private:
  // The world ranks on this rank's node (contiguous, local_world_ of them).
  std::vector<int> NodeRanks() const;
  int Next(int r) const { return (r + local_world_) % world_.size(); }
  int Prev(int r) const { return (r - local_world_ + world_.size()) % world_.size(); }
  // Makes the two-rank group of every rank s and Next(s), once: a
  // collective of the world group, which every rank runs before any
  // transfer.
  absl::Status MakePairs();
  // The group of rank s and Next(s) (made); this rank must be in it.
  absl::StatusOr<comm::ProcessGroup*> PairOf(int s);
  // Sends `files` (name, path) from `root` (a world rank of `group`).
  absl::Status Send(comm::ProcessGroup& group, int root, const std::vector<std::pair<std::string, std::string>>& files);
  // Receives what `root` sends into memory_'s incoming folder; the names.
  absl::StatusOr<std::vector<std::string>> Receive(comm::ProcessGroup& group, int root);

  // KeepSaved's work, on the worker thread.
  absl::Status KeepSavedNow(const std::string& folder, const std::string& dir, const std::string& tag,
                            const std::vector<std::string>& own);

  comm::ProcessGroup& world_;
  int local_world_;
  ckpt::MemoryCopies memory_;
  bool pairs_made_ = false;
  bool broken_ = false;  // a rank could not make its pairs (agreed): no exchange for the rest of the run
  std::map<std::pair<int, int>, std::shared_ptr<comm::ProcessGroup>> pairs_;  // (low, high) world ranks
  // The copy in the background: worker_status_ is written by the worker
  // and read only after joining it.
  std::thread worker_;
  absl::Status worker_status_;
};

}  // namespace zt
