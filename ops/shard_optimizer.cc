// MakeShardOptimizer: validates an OptimizerConfig and builds the matching
// shard optimizer (ops/shard_optimizer.h).
#include "ops/shard_optimizer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "ops/kernels.h"
#include "ops/optimizer_common.h"
#include "util/error.h"

namespace zt::ops {
namespace {

bool Finite(double v) { return std::isfinite(v); }

absl::Status Invalid(const char* optimizer, const char* key, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat("optimizer.params.", key, " (", optimizer, "): ", problem));
}

}  // namespace

absl::Status ValidateOptimizerConfig(const OptimizerConfig& config) {
  const char* name = internal::OptimizerName(config.type);
  if (!(Finite(config.lr) && config.lr >= 0.0)) {
    return Invalid(name, "lr", absl::StrCat(config.lr, " must be a finite value >= 0"));
  }
  if (!(Finite(config.weight_decay) && config.weight_decay >= 0.0)) {
    return Invalid(name, "weight_decay", absl::StrCat(config.weight_decay, " must be a finite value >= 0"));
  }
  const bool has_betas = config.type == OptimizerType::kAdam || config.type == OptimizerType::kAdamW ||
                         config.type == OptimizerType::kLion;
  if (has_betas) {
    for (double beta : config.betas) {
      if (!(beta >= 0.0 && beta < 1.0)) {
        return Invalid(name, "betas",
                       absl::StrCat("[", config.betas[0], ", ", config.betas[1], "]: each beta must be in [0, 1)"));
      }
    }
  }
  const bool has_eps = config.type == OptimizerType::kAdam || config.type == OptimizerType::kAdamW ||
                       config.type == OptimizerType::kAdagrad;
  if (has_eps && !(Finite(config.eps) && config.eps >= 0.0)) {
    return Invalid(name, "eps", absl::StrCat(config.eps, " must be a finite value >= 0"));
  }
  if (config.type == OptimizerType::kSGD) {
    if (!(Finite(config.momentum) && config.momentum >= 0.0)) {
      return Invalid(name, "momentum", absl::StrCat(config.momentum, " must be finite and >= 0"));
    }
    if (!Finite(config.dampening)) {
      return Invalid(name, "dampening", absl::StrCat(config.dampening, " must be finite"));
    }
    if (config.nesterov && (config.momentum <= 0.0 || config.dampening != 0.0)) {
      return Invalid(name, "nesterov",
                     absl::StrCat("Nesterov momentum needs momentum > 0 and dampening 0 "
                                  "(torch.optim.SGD's rule); got momentum ",
                                  config.momentum, ", dampening ", config.dampening));
    }
  }
  if (config.type == OptimizerType::kAdagrad &&
      !(Finite(config.initial_accumulator_value) && config.initial_accumulator_value >= 0.0)) {
    return Invalid(name, "initial_accumulator_value",
                   absl::StrCat(config.initial_accumulator_value, " must be finite and >= 0"));
  }
  return absl::OkStatus();
}

namespace {

// `kernels` null: the reference implementation.
std::unique_ptr<ShardOptimizer> Make(const OptimizerConfig& config, const kernels::KernelTable* kernels) {
  ThrowIfError(ValidateOptimizerConfig(config));
  switch (config.type) {
    case OptimizerType::kAdam:
    case OptimizerType::kAdamW: return internal::MakeAdam(config, kernels);
    case OptimizerType::kSGD: return internal::MakeSgd(config, kernels);
    case OptimizerType::kAdagrad: return internal::MakeAdagrad(config, kernels);
    case OptimizerType::kLion: return internal::MakeLion(config, kernels);
  }
  throw Error(absl::InvalidArgumentError(absl::StrCat(
      "optimizer.type: unsupported value ", static_cast<int>(config.type), "; use Adam, AdamW, Adagrad, Lion or SGD")));
}

[[noreturn]] void NoSplitUpdate(OptimizerType type) {
  throw Error(absl::FailedPreconditionError(absl::StrCat(
      internal::OptimizerName(type), " has no split update (its state update reads the parameters); call Step")));
}

}  // namespace

void ShardOptimizer::StepMoments(at::Tensor&, ShardState&, const StepHyper&, double) const { NoSplitUpdate(type()); }

void ShardOptimizer::ApplyIncrement(at::Tensor&, const at::Tensor&, const StepHyper&) const { NoSplitUpdate(type()); }

std::unique_ptr<ShardOptimizer> MakeShardOptimizer(const OptimizerConfig& config, Impl impl) {
  return Make(config, impl == Impl::kFast ? &kernels::ActiveKernels() : nullptr);
}

std::unique_ptr<ShardOptimizer> MakeShardOptimizer(const OptimizerConfig& config, const kernels::KernelTable& kernels) {
  return Make(config, &kernels);
}

}  // namespace zt::ops
