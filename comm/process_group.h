// zt::comm::ProcessGroup: the collectives ZeRO needs, on flat buffers.
//
// Contract (every backend):
//  * Collective calls must be issued in the same order on every rank of the
//    group, from one thread at a time. Each call returns at once; the
//    returned Work completes asynchronously. Many may be in flight.
//  * Tensors must be contiguous, on the backend's device, and stay alive and
//    untouched until the Work has completed. Once Wait() has returned, the
//    backend holds no reference to them (memory accounting relies on it).
//  * Uneven splits: for AllGather/ReduceScatter over a flat tensor of L
//    elements, rank r owns [ShardBegin(L, n, r), ShardEnd(L, n, r)) with shards
//    of ceil(L / n) elements (the last ones shorter, possibly empty).
//  * Errors (peer died, timeout, bad argument) surface from Work::Wait as a
//    Status naming the collective and, when known, the peer rank. A dead or
//    silent peer becomes an error within the group's timeout, never a hang.
//  * Every backend counts payload bytes it sends and receives per collective
//    kind (stats()), so benchmarks can compare against analytic volumes, and
//    the time callers spent waiting for its collectives.
//  * Sub-groups (NewSubGroup: node-local, cross-node, any rank list) keep
//    this contract among their members, count their own bytes, and name
//    ranks in errors by their world rank.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zt::comm {

enum class ReduceOp { kSum, kAvg, kMax, kMin };

enum class CollectiveKind { kAllGather = 0, kReduceScatter, kAllReduce, kBroadcast, kBarrier, kAllToAll };
inline constexpr int kNumCollectiveKinds = 6;
const char* ToString(CollectiveKind kind);  // "all_gather", "reduce_scatter", ...
const char* ToString(ReduceOp op);          // "sum", "avg", "max", "min"

struct CollectiveCounters {
  int64_t calls = 0;
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
};

struct CommStats {
  std::array<CollectiveCounters, kNumCollectiveKinds> by_kind{};
  // Time callers spent blocked in Work::Wait on this group's collectives
  // (from the call until completion, for works not complete when waited):
  // what the communication of this group did not hide behind compute.
  double wait_seconds = 0;
  const CollectiveCounters& operator[](CollectiveKind k) const { return by_kind[static_cast<int>(k)]; }
  int64_t total_bytes_sent() const;
  int64_t total_bytes_received() const;
};

// Rank r's shard of a flat buffer of `numel` elements split over `world` ranks.
inline int64_t ShardSize(int64_t numel, int world) { return (numel + world - 1) / world; }
inline int64_t ShardBegin(int64_t numel, int world, int rank) {
  int64_t b = ShardSize(numel, world) * rank;
  return b < numel ? b : numel;
}
inline int64_t ShardEnd(int64_t numel, int world, int rank) {
  int64_t e = ShardSize(numel, world) * (rank + 1);
  return e < numel ? e : numel;
}

// Handle to an asynchronous collective.
class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the collective finished or `timeout` passed. Returns OK,
  // DeadlineExceeded (names the collective and what it waited for), or the
  // collective's error. Calling Wait again returns the same result.
  // A Wait that runs out of time is final: the collective counts as failed
  // and the group aborts (so buffers are never written after the error). To
  // poll without that, use IsCompleted().
  virtual absl::Status Wait(std::chrono::milliseconds timeout) = 0;
  // Waits with the group's default timeout.
  virtual absl::Status Wait() = 0;
  virtual bool IsCompleted() = 0;
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend_name() const = 0;
  // Default deadline for Work::Wait() and for the backend's own transfers.
  virtual std::chrono::milliseconds timeout() const = 0;

  // Every rank contributes `shard` (its ShardBegin..ShardEnd slice of `flat`'s
  // numel); afterwards `flat` holds all shards in rank order. `shard` may be a
  // view of `flat` at this rank's offset (in place, no copy).
  virtual std::unique_ptr<Work> AllGather(const at::Tensor& shard, const at::Tensor& flat) = 0;

  // Element-wise reduction of `flat` across ranks; this rank receives its
  // slice into `shard`. kSum and kAvg only. `flat` is not modified.
  virtual std::unique_ptr<Work> ReduceScatter(const at::Tensor& flat, const at::Tensor& shard, ReduceOp op) = 0;

  // In-place element-wise reduction of `tensor` across ranks.
  virtual std::unique_ptr<Work> AllReduce(const at::Tensor& tensor, ReduceOp op) = 0;

  // Copies `tensor` from `root` into every rank's `tensor` (in place).
  virtual std::unique_ptr<Work> Broadcast(const at::Tensor& tensor, int root) = 0;

  virtual std::unique_ptr<Work> Barrier() = 0;

  // `input` and `output` hold size() equal blocks of numel / size() elements
  // (numel divisible by size(), the same on every rank): block j of `input`
  // goes to rank j, and block i of `output` receives rank i's block for this
  // rank (this rank's own block is copied). Any dtype; the two tensors share
  // it and must not overlap. Equal blocks let every rank plan the transfer
  // alone (callers pad shorter pieces, e.g. qgZ's records of uneven shards).
  virtual std::unique_ptr<Work> AllToAll(const at::Tensor& input, const at::Tensor& output) = 0;

  // Snapshot of this rank's counters since creation or the last ResetStats().
  virtual CommStats stats() const = 0;
  virtual void ResetStats() = 0;

  // The world rank of each of this group's ranks, in group-rank order (the
  // world group itself: 0 .. size() - 1).
  virtual std::vector<int> world_ranks() const = 0;
  // A sub-group of `ranks` (this group's ranks, ascending, no repeats), with
  // this group's options and the same contract; its rank r is ranks[r]. As
  // torch.distributed.new_group: every rank of this group calls it for every
  // sub-group, in the same order (members and non-members alike: the calls
  // number the sub-groups' store keys); a non-member gets nullptr. Members
  // connect to each other (collective among them); the sub-group must be
  // destroyed before this group. InvalidArgument names a bad list.
  virtual absl::StatusOr<std::shared_ptr<ProcessGroup>> NewSubGroup(const std::vector<int>& ranks) = 0;
};

}  // namespace zt::comm
