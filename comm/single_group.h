// ProcessGroup for a world of one rank: every collective's semantics with no
// communication (all-gather and reduce-scatter copy, all-reduce and
// broadcast leave the tensor as is), so single-process runs execute the same
// engine code. Counters count calls; bytes stay 0. Works on any device.
#pragma once

#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "comm/process_group.h"
#include "util/std_mutex.h"

namespace zt::comm {

class SingleGroup final : public ProcessGroup {
 public:
  // `world_rank`: this rank's rank in the world (a one-rank sub-group of a
  // larger group names it in errors and world_ranks()).
  explicit SingleGroup(std::chrono::milliseconds timeout = std::chrono::minutes(5), int world_rank = 0)
      : timeout_(timeout), world_rank_(world_rank) {}

  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend_name() const override { return "single"; }
  std::chrono::milliseconds timeout() const override { return timeout_; }

  // Each runs synchronously on the calling thread; the returned Work is complete.
  std::unique_ptr<Work> AllGather(const at::Tensor& shard, const at::Tensor& flat) override;
  std::unique_ptr<Work> ReduceScatter(const at::Tensor& flat, const at::Tensor& shard, ReduceOp op) override;
  std::unique_ptr<Work> AllReduce(const at::Tensor& tensor, ReduceOp op) override;
  std::unique_ptr<Work> Broadcast(const at::Tensor& tensor, int root) override;
  std::unique_ptr<Work> Barrier() override;
  std::unique_ptr<Work> AllToAll(const at::Tensor& input, const at::Tensor& output) override;

  CommStats stats() const override ABSL_LOCKS_EXCLUDED(mu_);
  void ResetStats() override ABSL_LOCKS_EXCLUDED(mu_);

  std::vector<int> world_ranks() const override { return {world_rank_}; }
  // {0}: another single group; anything else InvalidArgument.
  absl::StatusOr<std::shared_ptr<ProcessGroup>> NewSubGroup(const std::vector<int>& ranks) override;

 private:
  // Records the call and returns a completed Work; a bad argument fails the
  // group like on the Gloo backend, so behaviour does not depend on world size.
  // `action` (the local copy) runs only when the call is valid.
  std::unique_ptr<Work> Finish(CollectiveKind kind, const at::Tensor& t, absl::Status status,
                               const std::function<void()>& action = nullptr) ABSL_LOCKS_EXCLUDED(mu_);

  std::chrono::milliseconds timeout_;
  int world_rank_;
  mutable StdMutex mu_;
  CommStats stats_ ABSL_GUARDED_BY(mu_);
  uint32_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zt::comm
