// ProcessGroup for CPU tensors over a transport (comm/transport.h): shared
// memory among the ranks of one host, Gloo over TCP otherwise
// (comm/connect_transport.h chooses). Here: a worker pool, per-collective
// deadlines, the agreement check, heartbeats that name dead peers, failure
// handling and byte counters, the same for both transports.
//
// Threads: collectives are queued (FIFO) by the calling thread and run by
// up to `GroupOptions::worker_threads` workers (one on shared memory), so up
// to that many overlap. The tag of each collective is the group's sequence
// number at submission, so ranks agree as long as they submit in the same
// order (the contract).
//
// Work::Wait() without an argument waits for the group timeout plus the
// diagnosis budget (max(1.5 heartbeat intervals, 1 s) + 3 s), so a transfer that times
// out reports its own, diagnosed error first.
//
// Failure: the first collective that fails (peer closed, timeout, bad
// argument, Work::Wait deadline) fails the whole group: the transport is
// aborted so peers fail fast instead of waiting for their own timeouts, the
// reason goes into the store for their diagnosis, every pending Work
// completes with an error, and later calls return FailedPrecondition.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/group_options.h"
#include "comm/process_group.h"
#include "comm/rendezvous.h"

namespace zt::comm {

class Heartbeat;  // comm/heartbeat.h

class CpuGroup final : public ProcessGroup {
 public:
  // Connects the ranks (comm/connect_transport.h: keys under
  // "<options.store_prefix>/" in `store`), starts the heartbeat and the
  // workers, and ends with a barrier so no rank leaves start-up (and could
  // take rank 0's store down) before all have connected. Collective on all
  // ranks of `store.env`.
  static absl::StatusOr<std::shared_ptr<CpuGroup>> Create(const StoreHandle& store, const GroupOptions& options);

  // Lets queued collectives finish (bounded by the group timeout; at once
  // when the group has failed), then stops the workers. Workers stuck in a
  // dead transport are detached, never joined.
  ~CpuGroup() override;

  int rank() const override;
  int size() const override;
  std::string backend_name() const override;  // the transport's: "shm" or "gloo"
  std::chrono::milliseconds timeout() const override;

  std::unique_ptr<Work> AllGather(const at::Tensor& shard, const at::Tensor& flat) override;
  std::unique_ptr<Work> ReduceScatter(const at::Tensor& flat, const at::Tensor& shard, ReduceOp op) override;
  std::unique_ptr<Work> AllReduce(const at::Tensor& tensor, ReduceOp op) override;
  std::unique_ptr<Work> Broadcast(const at::Tensor& tensor, int root) override;
  std::unique_ptr<Work> Barrier() override;
  std::unique_ptr<Work> AllToAll(const at::Tensor& input, const at::Tensor& output) override;

  CommStats stats() const override;
  void ResetStats() override;

  std::vector<int> world_ranks() const override;
  // Members connect through the world's store under their own key prefix
  // ("<prefix>/sub<n>/", n counting this group's NewSubGroup calls) and share
  // the world group's heartbeat, so a failed sub-group collective names the
  // silent peer by its world rank; a one-rank sub-group is a SingleGroup.
  absl::StatusOr<std::shared_ptr<ProcessGroup>> NewSubGroup(const std::vector<int>& ranks) override;

  // The transport, for logs ("address 127.0.0.1 (...)", "shared memory (...)").
  const std::string& device_description() const;

  class Impl;

 private:
  explicit CpuGroup(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  // Create's steps for the world (world_ranks empty: 0..n-1, a heartbeat of
  // its own) and for a sub-group (its members' world ranks, the world's
  // heartbeat).
  static absl::StatusOr<std::shared_ptr<CpuGroup>> Connect(const StoreHandle& store, const GroupOptions& options,
                                                           std::vector<int> world_ranks,
                                                           std::shared_ptr<Heartbeat> heartbeat);
  std::shared_ptr<Impl> impl_;
};

}  // namespace zt::comm
