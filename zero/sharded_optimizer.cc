// Implementation of zero/sharded_optimizer.h.
#include "zero/sharded_optimizer.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "util/error.h"
#include "util/status.h"

namespace zt::zero {
namespace {

// Conversions between the owned parameters and fp32 go through temporaries
// of at most this many elements, so a huge group never doubles in memory.
constexpr int64_t kCopyChunk = int64_t{1} << 22;

at::Tensor FloatView(float* data, int64_t n) { return at::from_blob(data, {n}, at::kFloat); }

}  // namespace

absl::StatusOr<std::unique_ptr<ShardedOptimizer>> ShardedOptimizer::Create(std::vector<FlatGroup>& groups,
                                                                           const OptimizerConfig& config,
                                                                           ShardedOptimizerOptions options) {
  ResolvedParamGroups one;
  one.names = {"default"};
  one.configs = {config};
  one.lr.emplace_back();
  return Create(groups, one, std::move(options));
}

absl::StatusOr<std::unique_ptr<ShardedOptimizer>> ShardedOptimizer::Create(std::vector<FlatGroup>& groups,
                                                                           const ResolvedParamGroups& param_groups,
                                                                           ShardedOptimizerOptions options) {
  std::unique_ptr<ShardedOptimizer> so(new ShardedOptimizer(groups, std::move(options)));
  try {
    ZT_CHECK_MSG(!param_groups.configs.empty() && param_groups.lr.size() == param_groups.configs.size(),
                 "ShardedOptimizer::Create: no param groups");
    ZT_RETURN_IF_ERROR(so->SetParamGroups(param_groups));
    at::NoGradGuard no_grad;
    const at::ScalarType dtype = groups.empty() ? at::kFloat : groups.front().params.scalar_type();
    so->master_is_params_ = dtype == at::kFloat;
    std::vector<std::string> kinds;
    if (!so->master_is_params_) kinds.push_back("master");
    for (const auto& item : so->opts_[0]->InitState(at::empty({0}, at::kFloat)).tensors) kinds.push_back(item.first);
    so->master_kind_ = so->master_is_params_ ? -1 : 0;
    std::vector<int64_t> owned;
    for (const FlatGroup& g : groups) owned.push_back(g.owned_end() - g.owned_begin());
    if (so->options_.swap.has_value()) {
      ZT_ASSIGN_OR_RETURN(so->state_, MakeSwappedState(kinds, owned, *so->options_.swap, so->options_.io));
    } else {
      so->state_ = MakeResidentState(kinds, owned);
    }
    // The optimizer state starts at zero (both stores are zero-filled);
    // the master starts as the owned parameters.
    so->RefreshMaster();
  } catch (const Error& e) {
    return e.status();
  }
  return so;
}

absl::Status ShardedOptimizer::SetParamGroups(const ResolvedParamGroups& param_groups) {
  ZT_CHECK_MSG(!early_.open && !deferred_.open, "ShardedOptimizer::SetParamGroups while an update is open");
  ZT_CHECK_MSG(!param_groups.configs.empty() && param_groups.lr.size() == param_groups.configs.size(),
               "ShardedOptimizer: no param groups");
  std::vector<std::unique_ptr<ops::ShardOptimizer>> opts;
  try {
    for (size_t k = 0; k < param_groups.configs.size(); ++k) {
      const OptimizerConfig& c = param_groups.configs[k];
      ZT_CHECK_MSG(c.type == param_groups.configs[0].type && (opts_.empty() || c.type == opts_[0]->type()),
                   "ShardedOptimizer: param groups of different optimizers");
      absl::Status valid = ops::ValidateOptimizerConfig(c);
      if (!valid.ok() && param_groups.size() > 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("optimizer param group '", param_groups.names[k], "': ", valid.message()));
      }
      opts.push_back(ops::MakeShardOptimizer(c, options_.impl));
    }
  } catch (const Error& e) {
    return e.status();
  }
  opts_ = std::move(opts);
  group_lr_ = param_groups.lr;
  BuildRuns(param_groups.group_of);
  return absl::OkStatus();
}

void ShardedOptimizer::BuildRuns(const std::vector<int>& group_of) {
  runs_.clear();
  for (const FlatGroup& fg : groups_) {
    const int64_t ob = fg.owned_begin(), oe = fg.owned_end();
    std::vector<Run> runs;
    for (const plan::ParamSlot& slot : fg.layout.slots) {
      const int64_t b = std::max(slot.offset, ob), e = std::min(slot.offset + slot.numel, oe);
      if (b >= e) continue;
      const size_t i = static_cast<size_t>(slot.param_index);
      const int k = group_of.empty() ? 0 : group_of.at(i);
      ZT_CHECK(k >= 0 && k < static_cast<int>(opts_.size()));
      if (!runs.empty() && runs.back().param_group == k) {
        runs.back().end = e - ob;
      } else {
        runs.push_back({b - ob, e - ob, k});
      }
    }
    // Gaps (alignment, the tail padding) go to the run before them; an owned
    // range of padding only, to group 0.
    if (runs.empty()) runs.push_back({0, oe - ob, 0});
    runs.front().begin = 0;
    for (size_t r = 0; r + 1 < runs.size(); ++r) runs[r].end = runs[r + 1].begin;
    runs.back().end = oe - ob;
    runs_.push_back(std::move(runs));
  }
}

ops::StepHyper ShardedOptimizer::HyperFor(int k, const ops::StepHyper& hyper) const {
  ops::StepHyper h = hyper;
  if (const std::optional<double>& lr = group_lr_[static_cast<size_t>(k)]) h.lr = *lr;
  return h;
}

at::Tensor ShardedOptimizer::AcquireParams(int g, bool read) {
  if (options_.params != nullptr) return options_.params->Acquire(g, read);
  return groups_[static_cast<size_t>(g)].OwnedParams();
}

void ShardedOptimizer::ReleaseParams(int g, bool dirty) {
  if (options_.params != nullptr) options_.params->Release(g, dirty);
}

double ShardedOptimizer::LocalGradSquaredNorm() const {
  double total = 0.0;
  for (const FlatGroup& g : groups_) {
    at::Tensor grads = g.OwnedGrads();
    at::Tensor n = grads.scalar_type() == at::kFloat ? grads.norm() : grads.to(at::kFloat).norm();
    const double v = n.item<double>();
    total += v * v;
  }
  return total;
}

bool ShardedOptimizer::LocalHasNonFinite() const {
  for (const FlatGroup& g : groups_) {
    if (!at::isfinite(g.OwnedGrads()).all().item<bool>()) return true;
  }
  return false;
}

bool ShardedOptimizer::fp32_grads() const {
  // A split update's increment takes the gradient's place, so it must be fp32 too.
  return std::all_of(groups_.begin(), groups_.end(),
                     [](const FlatGroup& g) { return g.OwnedGrads().scalar_type() == at::kFloat; });
}

absl::Status ShardedOptimizer::UpdatePiece(Update& u, int g, int64_t b, int64_t e, float* const* data) {
  const std::vector<std::string>& kinds = state_->kinds();
  const int first_state = master_kind_ + 1;
  const int64_t n = e - b;
  if (!u.split && u.current != g) {
    // Groups come in the walk's direction (the swapped state's plain walks
    // alternate; the early step's go down, the deferred one's up): the one
    // after g in that direction is next.
    const int direction = u.direction;
    if (u.current >= 0) ReleaseParams(u.current, /*dirty=*/true);
    u.current = -1;
    u.owned = AcquireParams(g, /*read=*/master_is_params_);
    u.current = g;
    // Swapped parameters: the next groups start coming in now, as many as
    // the pool has room for.
    if (options_.params != nullptr) PrefetchParamsFrom(g + direction, direction);
  }
  const at::Tensor all_grads = groups_[static_cast<size_t>(g)].OwnedGrads();
  int64_t step_after = step_;
  // Run by run: each param group's elements with its own optimizer. Every
  // run starts from the same step count (the state's step is per update).
  for (const Run& run : runs_[static_cast<size_t>(g)]) {
    const int64_t rb = std::max(run.begin, b), re = std::min(run.end, e);
    if (rb >= re) continue;
    const int64_t rn = re - rb, at = rb - b;
    const ops::ShardOptimizer& opt = *opts_[static_cast<size_t>(run.param_group)];
    const ops::StepHyper hyper = HyperFor(run.param_group, u.hyper);
    ops::ShardState ss;
    ss.step = step_;
    for (size_t k = static_cast<size_t>(first_state); k < kinds.size(); ++k) {
      ss.tensors[kinds[k]] = FloatView(data[k] + at, rn);
    }
    at::Tensor grads = all_grads.narrow(0, rb, rn);
    if (u.split) {
      // The first half of a split update: no parameters needed.
      opt.StepMoments(grads, ss, hyper, u.grad_multiplier);
    } else {
      ops::StepExtras extras;
      extras.grad_scale = u.grad_multiplier;
      at::Tensor params;
      if (master_is_params_) {
        params = u.owned.narrow(0, rb, rn);
      } else {
        params = FloatView(data[master_kind_] + at, rn);
        extras.out = u.owned.narrow(0, rb, rn);
      }
      opt.Step(params, grads, ss, hyper, extras);
    }
    step_after = ss.step;
  }
  if (!u.split && u.at_gather) elements_at_gather_ += n;
  if (n > 0) u.step_after = step_after;
  elements_updated_ += n;
  if (u.in_backward) elements_in_backward_ += n;
  return absl::OkStatus();
}

void ShardedOptimizer::PrefetchParamsFrom(int g, int direction) {
  for (; g >= 0 && g < static_cast<int>(groups_.size()); g += direction) {
    if (!options_.params->Prefetch(g)) return;
  }
}

void ShardedOptimizer::PrefetchForStep(bool deferred) {
  if (options_.params == nullptr || groups_.empty()) return;
  const bool descending = !deferred && state_->NextWalkDescending();
  PrefetchParamsFrom(descending ? static_cast<int>(groups_.size()) - 1 : 0, descending ? -1 : 1);
}

void ShardedOptimizer::CloseUpdate(Update& u) {
  if (u.current >= 0) ReleaseParams(u.current, /*dirty=*/true);
  u.current = -1;
  u.owned = at::Tensor();
  u.open = false;
}

void ShardedOptimizer::Step(double grad_multiplier, const ops::StepHyper& hyper) {
  ZT_CHECK_MSG(!early_.open && !deferred_.open, "ShardedOptimizer::Step while an early or deferred step is open");
  at::NoGradGuard no_grad;
  Update u;
  u.open = true;
  u.grad_multiplier = grad_multiplier;
  u.hyper = hyper;
  u.direction = state_->NextWalkDescending() ? -1 : 1;
  u.step_after = step_ + 1;
  absl::Status st = state_->ForEachPiece(
      OptimizerState::Access::kReadWrite,
      [&](int g, int64_t b, int64_t e, float* const* data) { return UpdatePiece(u, g, b, e, data); });
  CloseUpdate(u);
  ThrowIfError(st);
  step_ = u.step_after;
}

void ShardedOptimizer::BeginEarlyStep(double grad_multiplier, const ops::StepHyper& hyper, int first_deferred) {
  ZT_CHECK_MSG((first_deferred < 0 ? CanUpdateEarly() : CanSplitUpdate()) && !early_.open && !deferred_.open,
               "ShardedOptimizer::BeginEarlyStep: not available or already open");
  early_ = Update();
  early_.grad_multiplier = grad_multiplier;
  early_.hyper = hyper;
  early_.split = first_deferred >= 0;
  early_.first_deferred = std::max(first_deferred, 0);
  early_.direction = -1;
  early_.step_after = step_ + 1;
  early_.error = state_->BeginWalk(/*descending=*/true);
  early_.open = true;
  // Nothing is final yet: this only starts the reads.
  EarlyStepReady(static_cast<int>(groups_.size()));
}

void ShardedOptimizer::EarlyStepReady(int first_final_group) {
  // A walk with nothing left (all visited, or no elements) waits for Finish.
  if (!early_.open || !early_.error.ok() || !state_->walk_open()) return;
  at::NoGradGuard no_grad;
  early_.in_backward = true;
  early_.error = state_->AdvanceWalk(
      first_final_group, options_.early_step_waits ? OptimizerState::Wait::kForReady : OptimizerState::Wait::kNever,
      [&](int g, int64_t b, int64_t e, float* const* data) { return UpdatePiece(early_, g, b, e, data); });
  early_.in_backward = false;
}

void ShardedOptimizer::FinishEarlyStep() {
  ZT_CHECK_MSG(early_.open, "ShardedOptimizer::FinishEarlyStep without BeginEarlyStep");
  at::NoGradGuard no_grad;
  // Backward may have left nothing to do.
  if (early_.error.ok() && state_->walk_open()) {
    early_.error = state_->AdvanceWalk(
        0, OptimizerState::Wait::kToEnd,
        [&](int g, int64_t b, int64_t e, float* const* data) { return UpdatePiece(early_, g, b, e, data); });
  }
  CloseUpdate(early_);
  const absl::Status st = early_.error;
  early_.error = absl::OkStatus();
  ThrowIfError(st);
  step_ = early_.step_after;
  if (!early_.split) return;
  // The second half: the increments wait in the gradient shards.
  deferred_ = Update();
  deferred_.split = true;
  deferred_.hyper = early_.hyper;
  deferred_.direction = 1;
  deferred_.step_after = step_;
  deferred_.open = true;
  deferred_next_ = 0;
  AdvanceDeferred(early_.first_deferred - 1, /*at_gather=*/false);
}

void ShardedOptimizer::BeginDeferredStep(double grad_multiplier, const ops::StepHyper& hyper, int first_deferred) {
  ZT_CHECK_MSG(CanDeferUpdate() && !early_.open && !deferred_.open,
               "ShardedOptimizer::BeginDeferredStep: not available or already open");
  deferred_ = Update();
  deferred_.grad_multiplier = grad_multiplier;
  deferred_.hyper = hyper;
  deferred_.direction = 1;
  deferred_.step_after = step_ + 1;
  deferred_.error = state_->BeginWalk(/*descending=*/false);
  deferred_.open = true;
  deferred_next_ = 0;
  AdvanceDeferred(first_deferred - 1, /*at_gather=*/false);
  // What the forward needs first starts coming in now.
  if (deferred_.open && deferred_.error.ok() && state_->walk_open()) {
    at::NoGradGuard no_grad;
    deferred_.error = state_->AdvanceWalk(deferred_next_, OptimizerState::Wait::kNever,
                                          [](int, int64_t, int64_t, float* const*) { return absl::OkStatus(); });
    ThrowIfError(deferred_.error);
  }
}

void ShardedOptimizer::AdvanceDeferred(int g, bool at_gather) {
  if (!deferred_.open) return;
  ThrowIfError(deferred_.error);
  const int groups = static_cast<int>(groups_.size());
  const int bound = std::min(g + 1, groups);
  if (bound <= deferred_next_ && bound < groups) return;
  at::NoGradGuard no_grad;
  if (deferred_.split) {
    ApplyIncrements(bound, at_gather);
  } else if (state_->walk_open()) {
    deferred_.at_gather = at_gather;
    deferred_.error = state_->AdvanceWalk(
        bound, bound >= groups ? OptimizerState::Wait::kToEnd : OptimizerState::Wait::kForReady,
        [&](int gi, int64_t b, int64_t e, float* const* data) { return UpdatePiece(deferred_, gi, b, e, data); });
    deferred_.at_gather = false;
  }
  // Whole groups below `bound` were visited: the last one's parameters go
  // back (written back behind what comes next).
  if (deferred_.current >= 0) {
    const int current = deferred_.current;
    deferred_.current = -1;
    deferred_.owned = at::Tensor();
    try {
      ReleaseParams(current, /*dirty=*/true);
    } catch (const Error& e) {
      if (deferred_.error.ok()) deferred_.error = e.status();
    }
  }
  ThrowIfError(deferred_.error);
  deferred_next_ = std::max(deferred_next_, bound);
  if (deferred_next_ >= groups) {
    CloseUpdate(deferred_);
    step_ = deferred_.step_after;
  }
}

void ShardedOptimizer::ApplyIncrements(int bound, bool at_gather) {
  for (int g = deferred_next_; g < bound && deferred_.error.ok(); ++g) {
    FlatGroup& group = groups_[static_cast<size_t>(g)];
    if (group.owned_end() == group.owned_begin()) continue;
    try {
      at::Tensor owned = AcquireParams(g, /*read=*/true);
      // The next shards start coming in behind this one's update.
      PrefetchParamsFrom(g + 1, 1);
      bool applied = false;
      try {
        const at::Tensor increments = group.OwnedGrads();
        for (const Run& run : runs_[static_cast<size_t>(g)]) {
          at::Tensor part = owned.narrow(0, run.begin, run.end - run.begin);
          opts_[static_cast<size_t>(run.param_group)]->ApplyIncrement(
              part, increments.narrow(0, run.begin, run.end - run.begin), HyperFor(run.param_group, deferred_.hyper));
        }
        applied = true;
      } catch (const Error& e) {
        deferred_.error = e.status();
      }
      ReleaseParams(g, /*dirty=*/applied);
      if (applied && at_gather) elements_at_gather_ += owned.numel();
    } catch (const Error& e) {
      if (deferred_.error.ok()) deferred_.error = e.status();
    }
  }
}

void ShardedOptimizer::RefreshMaster() {
  if (master_is_params_) return;
  at::NoGradGuard no_grad;
  for (int g = 0; g < static_cast<int>(groups_.size()); ++g) {
    at::Tensor owned = AcquireParams(g, /*read=*/true);
    absl::Status st;
    for (int64_t b = 0; b < owned.numel() && st.ok(); b += kCopyChunk) {
      const int64_t e = std::min(owned.numel(), b + kCopyChunk);
      const at::Tensor values = owned.narrow(0, b, e - b).to(at::kFloat).contiguous();
      st = state_->Write(master_kind_, g, b, e, values.data_ptr<float>());
    }
    ReleaseParams(g, /*dirty=*/false);
    ThrowIfError(st);
  }
}

void ShardedOptimizer::WriteBackParams() {
  if (master_is_params_) return;
  at::NoGradGuard no_grad;
  for (int g = 0; g < static_cast<int>(groups_.size()); ++g) {
    at::Tensor owned = AcquireParams(g, /*read=*/false);
    absl::Status st;
    at::Tensor tmp;
    for (int64_t b = 0; b < owned.numel() && st.ok(); b += kCopyChunk) {
      const int64_t e = std::min(owned.numel(), b + kCopyChunk);
      if (const float* resident = state_->Resident(master_kind_, g)) {
        owned.narrow(0, b, e - b).copy_(FloatView(const_cast<float*>(resident) + b, e - b));
        continue;
      }
      if (!tmp.defined()) tmp = at::empty({std::min(owned.numel(), kCopyChunk)}, at::kFloat);
      st = state_->Read(master_kind_, g, b, e, tmp.data_ptr<float>());
      if (st.ok()) owned.narrow(0, b, e - b).copy_(tmp.narrow(0, 0, e - b));
    }
    ReleaseParams(g, /*dirty=*/true);
    ThrowIfError(st);
  }
}

std::vector<std::string> ShardedOptimizer::state_names() const {
  const std::vector<std::string>& k = state_->kinds();
  return std::vector<std::string>(k.begin() + (master_kind_ + 1), k.end());
}

absl::Status ShardedOptimizer::Read(const std::string& kind, int g, int64_t b, int64_t e, float* dst) {
  if (deferred_.open) {
    return absl::FailedPreconditionError(
        "reading the optimizer state while the update at gather is still open (FinishDeferredStep first)");
  }
  if (kind == "master" && master_is_params_) {
    try {
      at::NoGradGuard no_grad;
      at::Tensor owned = AcquireParams(g, /*read=*/true);
      FloatView(dst, e - b).copy_(owned.narrow(0, b, e - b));
      ReleaseParams(g, /*dirty=*/false);
    } catch (const Error& err) {
      return err.status();
    }
    return absl::OkStatus();
  }
  const int k = state_->KindIndex(kind);
  if (k < 0) return absl::NotFoundError(absl::StrCat("this optimizer keeps no '", kind, "'"));
  return state_->Read(k, g, b, e, dst);
}

const float* ShardedOptimizer::Resident(const std::string& kind, int g) const {
  if (kind == "master" && master_is_params_) {
    return options_.params == nullptr ? groups_[static_cast<size_t>(g)].OwnedParams().data_ptr<float>() : nullptr;
  }
  const int k = state_->KindIndex(kind);
  return k < 0 ? nullptr : state_->Resident(k, g);
}

absl::StatusOr<std::unique_ptr<OptimizerState>> ShardedOptimizer::MakeStaging() const {
  std::vector<int64_t> owned;
  for (int g = 0; g < state_->num_groups(); ++g) owned.push_back(state_->owned_numel(g));
  if (!options_.swap.has_value()) return MakeResidentState(state_->kinds(), owned);
  offload::OptimizerSwapOptions swap = *options_.swap;
  swap.file_prefix += ".staging";
  return MakeSwappedState(state_->kinds(), owned, swap, options_.io);
}

void ShardedOptimizer::SetMasters(const std::vector<at::Tensor>& masters) {
  at::NoGradGuard no_grad;
  if (master_is_params_) {
    for (int g = 0; g < static_cast<int>(groups_.size()); ++g) {
      at::Tensor owned = AcquireParams(g, /*read=*/false);
      owned.copy_(masters[static_cast<size_t>(g)]);
      ReleaseParams(g, /*dirty=*/true);
    }
    return;
  }
  for (int g = 0; g < static_cast<int>(groups_.size()); ++g) {
    const at::Tensor m = masters[static_cast<size_t>(g)].contiguous();
    ThrowIfError(state_->Write(master_kind_, g, 0, m.numel(), m.data_ptr<float>()));
  }
  WriteBackParams();
}

void ShardedOptimizer::Adopt(std::unique_ptr<OptimizerState> staged, const std::vector<at::Tensor>& masters,
                             int64_t step) {
  ZT_CHECK(staged != nullptr && staged->kinds() == state_->kinds());
  state_ = std::move(staged);
  step_ = step;
  if (master_is_params_) {
    SetMasters(masters);
  } else {
    WriteBackParams();
  }
}

int64_t ShardedOptimizer::master_bytes() const { return master_kind_ >= 0 ? state_->resident_bytes(master_kind_) : 0; }

int64_t ShardedOptimizer::state_bytes() const {
  int64_t n = 0;
  for (int k = master_kind_ + 1; k < static_cast<int>(state_->kinds().size()); ++k) n += state_->resident_bytes(k);
  return n;
}

}  // namespace zt::zero
