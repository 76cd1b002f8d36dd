// Implementation of comm/single_group.h.
#include "comm/single_group.h"

#include <ATen/ATen.h>

#include <functional>

#include "absl/strings/str_cat.h"
#include "comm/collective_args.h"
#include "comm/collective_label.h"
#include "comm/sub_group.h"
#include "comm/work.h"

namespace zt::comm {

std::unique_ptr<Work> SingleGroup::Finish(CollectiveKind kind, const at::Tensor& t, absl::Status status,
                                          const std::function<void()>& action) {
  CollectiveInfo info{kind, 0, t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0,
                      t.defined() ? t.scalar_type() : c10::ScalarType::Byte, CollectiveLabel::Current()};
  StdMutexLock lock(&mu_);
  info.seq = next_seq_++;
  if (!failure_.ok()) {
    return CompletedWork(info,
                         absl::FailedPreconditionError(absl::StrCat(
                             info.Describe(), " not started: the process group failed earlier: ", failure_.message())));
  }
  if (!status.ok()) {
    failure_ = absl::Status(status.code(), absl::StrCat(status.message(), " (", info.Describe(), " on rank ",
                                                        world_rank_, "; the process group is no longer usable)"));
    return CompletedWork(info, failure_);
  }
  if (action) action();
  stats_.by_kind[static_cast<int>(kind)].calls += 1;
  return CompletedWork(info, absl::OkStatus());
}

std::unique_ptr<Work> SingleGroup::AllGather(const at::Tensor& shard, const at::Tensor& flat) {
  bool in_place = false;
  absl::Status ok = CheckAllGatherArgs(shard, flat, 0, 1, std::nullopt, &in_place);
  return Finish(CollectiveKind::kAllGather, flat, ok, [&] {
    if (!in_place && flat.numel() > 0) flat.view({-1}).copy_(shard.view({-1}));
  });
}

std::unique_ptr<Work> SingleGroup::ReduceScatter(const at::Tensor& flat, const at::Tensor& shard, ReduceOp op) {
  absl::Status ok = CheckReduceScatterArgs(flat, shard, op, 0, 1, std::nullopt);
  // Sum or average over one rank is the input itself.
  return Finish(CollectiveKind::kReduceScatter, flat, ok, [&] {
    if (flat.numel() > 0 && shard.data_ptr() != flat.data_ptr()) {
      shard.view({-1}).copy_(flat.view({-1}));
    }
  });
}

std::unique_ptr<Work> SingleGroup::AllReduce(const at::Tensor& tensor, ReduceOp op) {
  return Finish(CollectiveKind::kAllReduce, tensor, CheckAllReduceArgs(tensor, op, std::nullopt));
}

std::unique_ptr<Work> SingleGroup::Broadcast(const at::Tensor& tensor, int root) {
  return Finish(CollectiveKind::kBroadcast, tensor, CheckBroadcastArgs(tensor, root, 1, std::nullopt));
}

std::unique_ptr<Work> SingleGroup::Barrier() {
  return Finish(CollectiveKind::kBarrier, at::Tensor(), absl::OkStatus());
}

std::unique_ptr<Work> SingleGroup::AllToAll(const at::Tensor& input, const at::Tensor& output) {
  absl::Status ok = CheckAllToAllArgs(input, output, 1, std::nullopt);
  return Finish(CollectiveKind::kAllToAll, input, ok, [&] {
    if (input.numel() > 0) output.view({-1}).copy_(input.view({-1}));
  });
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> SingleGroup::NewSubGroup(const std::vector<int>& ranks) {
  if (absl::Status s = CheckSubGroupRanks(ranks, 1); !s.ok()) return s;
  return std::shared_ptr<ProcessGroup>(std::make_shared<SingleGroup>(timeout_, world_rank_));
}

CommStats SingleGroup::stats() const {
  StdMutexLock lock(&mu_);
  return stats_;
}

void SingleGroup::ResetStats() {
  StdMutexLock lock(&mu_);
  stats_ = CommStats{};
}

}  // namespace zt::comm
