// Implementation of zero/grad_reducer.h.
#include "zero/grad_reducer.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/collective_label.h"
#include "util/error.h"
#include "util/status.h"

namespace zt::zero {

// Shared between the reducer and its hooks, so a hook that outlives the
// reducer (the module outlives the engine) does nothing.
struct GradReducer::HookState {
  absl::Mutex mu;
  GradReducer* reducer ABSL_GUARDED_BY(mu) = nullptr;
};

// Runs after AccumulateGrad has added this backward's gradient into .grad.
class GradReducer::PostHook : public torch::autograd::FunctionPostHook {
 public:
  PostHook(std::shared_ptr<HookState> state, int param_index) : state_(std::move(state)), param_index_(param_index) {}

  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    absl::MutexLock lock(&state_->mu);
    if (state_->reducer != nullptr) state_->reducer->OnGradReady(param_index_);
    return outputs;
  }

 private:
  std::shared_ptr<HookState> state_;
  int param_index_;
};

GradReducer::GradReducer(std::vector<FlatGroup>& groups, std::vector<at::Tensor> params,
                         std::shared_ptr<comm::ProcessGroup> pg, GradReducerOptions options)
    : groups_(groups),
      params_(std::move(params)),
      pg_(std::move(pg)),
      options_(options),
      hook_state_(std::make_shared<HookState>()) {
  // How to reduce follows from where the gradients live, which must be
  // where the stage puts them (a mismatch would reduce the wrong buffers
  // without an error): every group alike.
  ZT_CHECK(options_.sharding.stage() >= 0 && options_.sharding.stage() <= 3);
  const GradResidency residency = GradResidencyFor(options_.sharding);
  switch (residency) {
    case GradResidency::kFullFlat: reduction_ = Reduction::kAllReduce; break;
    case GradResidency::kFullFlatOwnedSlice: reduction_ = Reduction::kScatterToSlice; break;
    case GradResidency::kShardOnly: reduction_ = Reduction::kBucketsToShards; break;
    case GradResidency::kNone: ZT_CHECK_MSG(false, "GradReducer: the groups hold no gradients"); break;
  }
  param_state_.resize(params_.size());
  group_state_.resize(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    ZT_CHECK_MSG(groups_[g].grad_residency == residency, "group %zu's gradients do not live where stage %d keeps them",
                 g, options_.sharding.stage());
    const auto& slots = groups_[g].layout.slots;
    for (size_t s = 0; s < slots.size(); ++s) {
      ParamState& p = param_state_[static_cast<size_t>(slots[s].param_index)];
      p.group = static_cast<int>(g);
      p.slot = static_cast<int>(s);
    }
  }

  hook_state_->reducer = this;  // no hook is registered yet: nothing to lock against
  for (size_t i = 0; i < params_.size(); ++i) {
    if (param_state_[i].group < 0) continue;  // not trained (not in any group)
    std::shared_ptr<torch::autograd::Node> acc = torch::autograd::impl::grad_accumulator(params_[i]);
    ZT_CHECK_MSG(acc != nullptr, "parameter %zu has no gradient accumulator", i);
    acc->add_post_hook(std::make_unique<PostHook>(hook_state_, static_cast<int>(i)));
    accumulators_.push_back(std::move(acc));
  }
}

GradReducer::~GradReducer() {
  {
    absl::MutexLock lock(&hook_state_->mu);
    hook_state_->reducer = nullptr;
  }
  // Collectives still in flight reference our tensors: wait for them (bounded
  // by the process group's timeout) before the buffers go away.
  for (InFlight& f : inflight_) (void)f.work->Wait();
}

void GradReducer::BeginBackward(bool reduce) {
  absl::MutexLock lock(&mu_);
  ZT_CHECK_MSG(phase_ == Phase::kIdle, "BeginBackward called twice without FinishBackward");
  phase_ = buckets() || reduce ? Phase::kReducing : Phase::kAccumulating;
  boundary_ = reduce;
  for (ParamState& p : param_state_) p.ready = false;
  for (size_t g = 0; g < groups_.size(); ++g) {
    GroupState& s = group_state_[g];
    s.complete = false;
    s.launched = false;
    s.pending = static_cast<int>(groups_[g].layout.slots.size());
  }
  next_launch_ = 0;
}

int64_t GradReducer::peak_bucket_bytes() const {
  absl::MutexLock lock(&mu_);
  return scratch_.held_bytes() + shard_scratch_.held_bytes();
}

at::Tensor GradReducer::EnsureBucketLocked(int group_index) {
  at::Tensor& bucket = group_state_[static_cast<size_t>(group_index)].bucket;
  if (!bucket.defined()) {
    const FlatGroup& g = groups_[static_cast<size_t>(group_index)];
    bucket = scratch_.Acquire(g.layout.padded_numel, g.params.options(), /*zeroed=*/true);
  }
  return bucket;
}

void GradReducer::OnGradReady(int param_index) {
  absl::MutexLock lock(&mu_);
  ParamState& p = param_state_[static_cast<size_t>(param_index)];
  const int g = p.group;
  const int s = p.slot;
  if (g < 0) return;
  if (phase_ == Phase::kIdle && outside_backward_param_ < 0) outside_backward_param_ = param_index;
  FlatGroup& group = groups_[static_cast<size_t>(g)];
  const plan::ParamSlot& slot = group.layout.slots[static_cast<size_t>(s)];
  at::Tensor& param = params_[static_cast<size_t>(param_index)];
  at::Tensor& grad = param.mutable_grad();
  at::NoGradGuard no_grad;
  if (phase_ == Phase::kReducing && p.ready && (buckets() || options_.overlap_comm)) {
    const std::string name = ParamName(param_index);
    throw Error(absl::FailedPreconditionError(absl::StrFormat(
        "parameter '%s' received a second gradient in one backward: it is used by more than one "
        "activation-checkpointed call. ZeRO stage %d%s reduces a gradient as soon as it arrives; checkpoint "
        "those calls together (one zt::Checkpoint or one unit), or train at stage 0/1 with overlap_comm off",
        name, options_.sharding.stage(), options_.overlap_comm && !buckets() ? " with overlap_comm" : "")));
  }

  if (buckets()) {
    // Outside Engine::Backward there is nowhere to put the gradient; it stays
    // in .grad and the engine reports the misuse at Step.
    if (phase_ == Phase::kIdle || !grad.defined()) return;
    at::Tensor bucket = EnsureBucketLocked(g);
    SlotView(bucket, slot, param).copy_(grad);
    grad.reset();  // frees it: stage 2 keeps only the reduced shard
  } else {
    // Stages 0/1: .grad should be our view, accumulated in place by autograd.
    // If user code replaced it (e.g. zero_grad(set_to_none)), fold it back.
    at::Tensor view = SlotView(group.grads, slot, param);
    if (grad.defined() && !grad.is_same(view) && grad.data_ptr() != view.data_ptr()) {
      view.add_(grad);
      grad = view;
    } else if (!grad.defined()) {
      grad = view;
    }
  }
  if (phase_ != Phase::kReducing || p.ready) return;
  p.ready = true;
  GroupState& state = group_state_[static_cast<size_t>(g)];
  if (--state.pending == 0) {
    state.complete = true;
    if (buckets()) {
      // Reduced as soon as it is complete, so its bucket goes back to the
      // pool (before, stage 2 launched in index order, and without
      // overlap_comm only in FinishBackward: every bucket waited).
      // Stage 2: the bucket reduced before finishes first, so one bucket is
      // in flight while the next fills (DeepSpeed's two IPG buffers).
      while (options_.wait_before_launch && !inflight_.empty() &&
             static_cast<int>(inflight_.size()) >= options_.max_inflight_groups) {
        FinalizeOldestLocked();
      }
      LaunchLocked(g);
      if (!options_.overlap_comm) {
        while (!inflight_.empty()) FinalizeOldestLocked();
      }
      if (options_.on_group_complete) options_.on_group_complete(g);
    } else if (options_.overlap_comm) {
      LaunchReadyLocked();
    }
  }
}

void GradReducer::LaunchReadyLocked() {
  while (next_launch_ < static_cast<int>(groups_.size()) && group_state_[static_cast<size_t>(next_launch_)].complete) {
    const int g = next_launch_++;
    if (group_state_[static_cast<size_t>(g)].launched) continue;
    LaunchLocked(g);
    if (options_.on_group_complete) options_.on_group_complete(g);
  }
}

void GradReducer::LaunchLocked(int group_index) {
  FlatGroup& group = groups_[static_cast<size_t>(group_index)];
  GroupState& state = group_state_[static_cast<size_t>(group_index)];
  const int world = WorldSize();
  at::NoGradGuard no_grad;
  state.launched = true;

  at::Tensor input = buckets() ? EnsureBucketLocked(group_index) : group.grads;
  const bool quantized = options_.quantized_gradients && buckets() && pg_->size() > 1;
  if (quantized && input.scalar_type() != at::kFloat) {
    // qgZ quantizes fp32 values and sums in fp32, whatever the model dtype.
    at::Tensor cast = scratch_.Acquire(input.numel(), input.options().dtype(at::kFloat), /*zeroed=*/false);
    cast.copy_(input);
    input = cast;
  } else if (!quantized && options_.comm_dtype && *options_.comm_dtype != input.scalar_type()) {
    at::Tensor cast = scratch_.Acquire(input.numel(), input.options().dtype(*options_.comm_dtype),
                                       /*zeroed=*/false);
    cast.copy_(input);
    input = cast;
  }
  if (options_.prescale_gradients) {
    input.div_(static_cast<double>(world));
  } else if (options_.gradient_predivide_factor != 1.0) {
    input.mul_(1.0 / options_.gradient_predivide_factor);
  }

  InFlight f;
  f.group = group_index;
  f.input = input;
  comm::CollectiveLabel label(absl::StrCat("gradient bucket ", group_index, " of ", groups_.size()));
  if (quantized) {
    const QuantizedReduction plan(input.numel(), pg_->size(), pg_->rank(), *options_.quantized_gradients);
    ErrorFeedback* feedback = nullptr;
    if (options_.error_feedback) {
      if (!state.feedback.defined())
        state.feedback = ErrorFeedback(input.numel(), pg_->size(), *options_.error_feedback);
      feedback = &state.feedback;
    }
    const auto bytes = input.options().dtype(at::kByte);
    f.wire_send = scratch_.Acquire(plan.wire_numel(), bytes, /*zeroed=*/false);
    f.wire_recv = scratch_.Acquire(plan.wire_numel(), bytes, /*zeroed=*/false);
    plan.QuantizeForPeers(input, f.wire_send, feedback);
    f.output = shard_scratch_.Acquire(group.layout.shard_numel, input.options(), /*zeroed=*/false);
    f.work = pg_->AllToAll(f.wire_send, f.wire_recv);
  } else if (reduction_ == Reduction::kAllReduce) {
    f.output = input;
    f.work = pg_->AllReduce(input, comm::ReduceOp::kSum);
  } else {
    const bool direct = buckets() && !state.shard_has_data && input.scalar_type() == group.grad_shard.scalar_type() &&
                        group.grad_shard.is_contiguous();
    f.output =
        direct ? group.grad_shard : shard_scratch_.Acquire(group.layout.shard_numel, input.options(), /*zeroed=*/false);
    f.work = pg_->ReduceScatter(input, f.output, comm::ReduceOp::kSum);
  }
  inflight_.push_back(std::move(f));
  if (buckets() && static_cast<int>(inflight_.size()) > options_.max_inflight_groups) {
    FinalizeOldestLocked();
  }
}

void GradReducer::FinalizeOldestLocked() {
  InFlight f = std::move(inflight_.front());
  inflight_.pop_front();
  FlatGroup& group = groups_[static_cast<size_t>(f.group)];
  GroupState& state = group_state_[static_cast<size_t>(f.group)];
  absl::Status st = f.work->Wait();
  if (!st.ok()) {
    throw Error(absl::Status(st.code(), absl::StrFormat("reducing gradients of parameter group %d "
                                                        "(%d parameters) failed: %s",
                                                        f.group, group.layout.slots.size(), st.message())));
  }
  at::NoGradGuard no_grad;
  if (f.wire_recv.defined()) {
    const QuantizedReduction plan(f.input.numel(), pg_->size(), pg_->rank(), *options_.quantized_gradients);
    plan.DequantizeSum(f.wire_recv, f.input, f.output);
    scratch_.Release(f.wire_send);
    scratch_.Release(f.wire_recv);
  }
  const int world = WorldSize();
  if (!options_.prescale_gradients && options_.gradient_predivide_factor != world) {
    f.output.mul_(options_.gradient_predivide_factor / static_cast<double>(world));
  }

  if (reduction_ == Reduction::kAllReduce) {
    if (!f.output.is_same(group.grads)) group.grads.copy_(f.output);
  } else {
    const bool direct = f.output.is_same(group.grad_shard);
    if (!direct) {
      if (buckets() && state.shard_has_data) {
        group.grad_shard.add_(f.output);
      } else {
        group.grad_shard.copy_(f.output);
      }
      shard_scratch_.Release(f.output);
    }
    if (buckets()) state.shard_has_data = true;
  }
  // Scratch goes back to the pool: a comm-dtype cast and the stage-2 bucket.
  at::Tensor& bucket = state.bucket;
  if (!f.input.is_same(group.grads)) scratch_.Release(f.input);
  if (bucket.defined() && !f.input.is_same(bucket)) scratch_.Release(bucket);
  bucket = at::Tensor();
  if (options_.replica && boundary_ && reduction_ != Reduction::kAllReduce) {
    // The shard group's sums (accumulated over the micro-steps, as
    // DeepSpeed's MiCS does), summed across the replicas holding the same
    // shard: every rank's gradient, in two hops, once per optimizer step.
    // In flight while backward goes on; FinishBackward waits for it.
    comm::CollectiveLabel label(absl::StrCat("gradient bucket ", f.group, " of ", groups_.size(), " across replicas"));
    InFlight across;
    across.group = f.group;
    across.output = group.grad_shard;
    across.work = options_.replica->AllReduce(group.grad_shard, comm::ReduceOp::kSum);
    across_inflight_.push_back(std::move(across));
    return;
  }
  if (buckets() && options_.on_group_reduced) options_.on_group_reduced(f.group);
}

void GradReducer::FinishAcrossReplicasLocked() {
  while (!across_inflight_.empty()) {
    InFlight f = std::move(across_inflight_.front());
    across_inflight_.pop_front();
    const absl::Status st = f.work->Wait();
    if (!st.ok()) {
      // The rest cannot complete either: the group aborted.
      across_inflight_.clear();
      throw Error(absl::Status(st.code(), absl::StrFormat("all-reducing gradients of parameter group %d across the %d "
                                                          "replicas of its shard failed: %s",
                                                          f.group, options_.replica->size(), st.message())));
    }
    if (buckets() && options_.on_group_reduced) options_.on_group_reduced(f.group);
  }
}

void GradReducer::FinishBackward() {
  absl::MutexLock lock(&mu_);
  ZT_CHECK_MSG(phase_ != Phase::kIdle, "FinishBackward without BeginBackward");
  const bool reducing = phase_ == Phase::kReducing;
  phase_ = Phase::kIdle;
  if (!reducing) return;
  // Groups with parameters that got no gradient (unused in this forward)
  // still take part, with zeros, so all ranks run the same collectives.
  for (GroupState& s : group_state_) s.complete = true;
  next_launch_ = 0;
  LaunchReadyLocked();
  while (!inflight_.empty()) FinalizeOldestLocked();
  FinishAcrossReplicasLocked();
}

void GradReducer::ZeroGrads(int first_kept) {
  absl::MutexLock lock(&mu_);
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < groups_.size(); ++i) {
    FlatGroup& g = groups_[i];
    switch (g.grad_residency) {
      case GradResidency::kNone: break;
      case GradResidency::kFullFlat:
      case GradResidency::kFullFlatOwnedSlice: g.grads.zero_(); break;  // grad_shard (stage 1) is a view of it
      case GradResidency::kShardOnly:
        // shard_has_data (reset below) makes the next reduction write, not add.
        if (first_kept < 0 || static_cast<int>(i) < first_kept) g.grad_shard.zero_();
        break;
    }
  }
  for (GroupState& s : group_state_) s.shard_has_data = false;
  outside_backward_param_ = -1;
}

void GradReducer::ScaleErrorFeedback(double factor) {
  absl::MutexLock lock(&mu_);
  for (GroupState& s : group_state_) s.feedback.Scale(factor);
}

void GradReducer::ClearErrorFeedback() {
  absl::MutexLock lock(&mu_);
  for (GroupState& s : group_state_) s.feedback.Clear();
}

int64_t GradReducer::error_feedback_bytes() const {
  absl::MutexLock lock(&mu_);
  int64_t total = 0;
  for (const GroupState& s : group_state_) total += s.feedback.bytes();
  return total;
}

std::optional<std::string> GradReducer::GradientOutsideBackward() const {
  absl::MutexLock lock(&mu_);
  if (outside_backward_param_ < 0) return std::nullopt;
  return ParamName(outside_backward_param_);
}

std::string GradReducer::ParamName(int param_index) const {
  const auto i = static_cast<size_t>(param_index);
  return i < options_.param_names.size() ? options_.param_names[i] : absl::StrFormat("#%d", param_index);
}

}  // namespace zt::zero
