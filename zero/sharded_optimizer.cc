// Implementation of zero/sharded_optimizer.h.
#include "zero/sharded_optimizer.h"

#include <ATen/ATen.h>

#include "util/status.h"

namespace zt::zero {

ShardedOptimizer::ShardedOptimizer(std::vector<FlatGroup>& groups, const OptimizerConfig& config,
                                   ops::Impl impl)
    : groups_(groups), opt_(ops::MakeShardOptimizer(config, impl)) {
  at::NoGradGuard no_grad;
  for (FlatGroup& g : groups_) {
    at::Tensor owned = g.OwnedParams();
    const bool alias = owned.scalar_type() == at::kFloat;
    master_.push_back(alias ? owned : owned.to(at::kFloat).contiguous());
    aliased_.push_back(alias ? 1 : 0);
    states_.push_back(opt_->InitState(master_.back()));
  }
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

void ShardedOptimizer::Step(double grad_multiplier, const ops::StepHyper& hyper) {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < groups_.size(); ++i) {
    FlatGroup& g = groups_[i];
    at::Tensor grads = g.OwnedGrads();
    if (grad_multiplier != 1.0) grads.mul_(grad_multiplier);
    at::Tensor grads32 = grads.scalar_type() == at::kFloat ? grads : grads.to(at::kFloat);
    opt_->Step(master_[i], grads32, states_[i], hyper);
    if (!aliased_[i]) g.OwnedParams().copy_(master_[i]);
  }
}

void ShardedOptimizer::RefreshMaster() {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < groups_.size(); ++i) {
    if (!aliased_[i]) master_[i].copy_(groups_[i].OwnedParams());
  }
}

void ShardedOptimizer::WriteBackParams() {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < groups_.size(); ++i) {
    if (!aliased_[i]) groups_[i].OwnedParams().copy_(master_[i]);
  }
}

int64_t ShardedOptimizer::master_bytes() const {
  int64_t n = 0;
  for (size_t i = 0; i < master_.size(); ++i) {
    if (!aliased_[i]) n += static_cast<int64_t>(master_[i].nbytes());
  }
  return n;
}

int64_t ShardedOptimizer::state_bytes() const {
  int64_t n = 0;
  for (const ops::ShardState& s : states_) {
    for (const auto& [name, t] : s.tensors) n += static_cast<int64_t>(t.nbytes());
  }
  return n;
}

}  // namespace zt::zero
