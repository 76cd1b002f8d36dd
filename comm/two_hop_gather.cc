// Implementation of comm/two_hop_gather.h.
#include "comm/two_hop_gather.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace zt::comm {

class TwoHopGather::TwoHopWork final : public Work {
 public:
  TwoHopWork(TwoHopGather* owner, std::shared_ptr<Op> op, std::chrono::milliseconds timeout)
      : owner_(owner), op_(std::move(op)), timeout_(timeout) {}
  absl::Status Wait(std::chrono::milliseconds timeout) override { return owner_->Finish(op_.get(), timeout); }
  absl::Status Wait() override { return Wait(timeout_); }
  bool IsCompleted() override { return op_->done; }

 private:
  TwoHopGather* owner_;
  std::shared_ptr<Op> op_;
  std::chrono::milliseconds timeout_;
};

absl::StatusOr<std::shared_ptr<TwoHopGather>> TwoHopGather::Create(const std::shared_ptr<ProcessGroup>& group,
                                                                   int ranks_per_host) {
  const int k = group->size();
  if (ranks_per_host < 1 || k % ranks_per_host != 0) {
    return absl::InvalidArgumentError(absl::StrCat("a two-hop gather over ", k, " ranks needs the ranks per host (",
                                                   ranks_per_host, ") to divide them"));
  }
  std::shared_ptr<TwoHopGather> g(new TwoHopGather());
  g->group_ = group;
  g->ranks_per_host_ = ranks_per_host;
  g->hosts_ = k / ranks_per_host;
  const int me = group->rank();
  for (int l = 0; l < ranks_per_host; ++l) {
    std::vector<int> column;
    for (int h = 0; h < g->hosts_; ++h) column.push_back(h * ranks_per_host + l);
    absl::StatusOr<std::shared_ptr<ProcessGroup>> made = group->NewSubGroup(column);
    if (!made.ok()) {
      return absl::Status(made.status().code(),
                          absl::StrCat("the two-hop gather's cross-host group ", l, ": ", made.status().message()));
    }
    if (me % ranks_per_host == l) g->column_ = *std::move(made);
  }
  for (int h = 0; h < g->hosts_; ++h) {
    std::vector<int> host;
    for (int l = 0; l < ranks_per_host; ++l) host.push_back(h * ranks_per_host + l);
    absl::StatusOr<std::shared_ptr<ProcessGroup>> made = group->NewSubGroup(host);
    if (!made.ok()) {
      return absl::Status(made.status().code(),
                          absl::StrCat("the two-hop gather's host group ", h, ": ", made.status().message()));
    }
    if (me / ranks_per_host == h) g->host_ = *std::move(made);
  }
  return g;
}

std::unique_ptr<Work> TwoHopGather::AllGather(const at::Tensor& shard, const at::Tensor& flat) {
  const int k = group_->size();
  if (flat.numel() % k != 0 || shard.numel() * k != flat.numel() || hosts_ == 1 || ranks_per_host_ == 1) {
    return group_->AllGather(shard, flat);  // uneven shards, or one hop is all there is
  }
  auto op = std::make_shared<Op>();
  const int64_t s = shard.numel();
  op->column = at::empty({hosts_ * s}, flat.options());
  op->flat = flat;
  op->first = column_->AllGather(shard.is_contiguous() ? shard : shard.contiguous(), op->column);
  pending_.push_back(op);
  return std::make_unique<TwoHopWork>(this, op, group_->timeout());
}

void TwoHopGather::Advance(Op* op) {
  while (!pending_.empty()) {
    std::shared_ptr<Op> next = pending_.front();
    pending_.pop_front();
    next->status = next->first->Wait();
    if (next->status.ok()) {
      next->blocks = at::empty({next->flat.numel()}, next->flat.options());
      next->second = host_->AllGather(next->column, next->blocks);
    }
    if (next.get() == op) return;
  }
}

absl::Status TwoHopGather::Finish(Op* op, std::chrono::milliseconds timeout) {
  if (op->done) return op->status;
  if (op->second == nullptr && op->status.ok()) Advance(op);
  if (op->status.ok()) op->status = op->second->Wait(timeout);
  if (op->status.ok()) {
    // blocks: [place l][host h][shard]; flat: [host h][place l][shard].
    const int64_t s = op->flat.numel() / group_->size();
    op->flat.view({hosts_, ranks_per_host_, s}).copy_(op->blocks.view({ranks_per_host_, hosts_, s}).transpose(0, 1));
  }
  op->blocks = at::Tensor();
  op->column = at::Tensor();
  op->done = true;
  return op->status;
}

CommStats TwoHopGather::stats() const {
  CommStats a = column_->stats();
  const CommStats b = host_->stats();
  for (size_t i = 0; i < a.by_kind.size(); ++i) {
    a.by_kind[i].calls += b.by_kind[i].calls;
    a.by_kind[i].bytes_sent += b.by_kind[i].bytes_sent;
    a.by_kind[i].bytes_received += b.by_kind[i].bytes_received;
  }
  a.wait_seconds += b.wait_seconds;
  return a;
}

}  // namespace zt::comm
