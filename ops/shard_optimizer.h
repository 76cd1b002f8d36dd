// Optimizers that update one flat fp32 shard in place (ZeRO's master weights).
//
// The update is element-wise, so a rank updating only its shard computes
// exactly what a full-model optimizer would for those elements. Each type has
// a fast implementation and a plain scalar reference (Impl::kReference) that
// tests compare it against, and both match LibTorch's torch::optim where a
// LibTorch counterpart exists (Adam, AdamW, SGD, Adagrad).
//
//   auto opt = zt::ops::MakeShardOptimizer(config.optimizer);
//   zt::ops::ShardState state = opt->InitState(master_shard);
//   zt::ops::StepHyper hyper;  // ({.lr = x} trips -Wmissing-field-initializers)
//   hyper.lr = scheduler->Lr(steps_taken);
//   hyper.momentum = scheduler->Momentum(steps_taken);
//   opt->Step(master_shard, grad_shard, state, hyper);
//
// Thread-safety: a ShardOptimizer is immutable after creation; Step mutates
// only the tensors passed to it. Step may use intra-op threads (at::parallel_for).
//
// Errors: a config the optimizers cannot run (negative lr, beta outside [0, 1),
// nesterov without momentum, ...) makes MakeShardOptimizer throw zt::Error
// (InvalidArgument, naming the "optimizer.params" key); ValidateOptimizerConfig
// returns the same Status without throwing. Step throws zt::Error
// (InvalidArgument / FailedPrecondition) for tensors that break its contract
// (dtype, device, size, missing state) and leaves everything unchanged then.
// Update formulas and DeepSpeed semantics: docs/optimizers.md.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "config/config.h"

namespace zt::ops {

// Hyper-parameters that may change every step (a scheduler drives them).
struct StepHyper {
  double lr = 0.0;
  // OneCycle momentum cycling: replaces Adam/AdamW/Lion beta1 or SGD momentum
  // for this step when set. Adagrad has no momentum and ignores it.
  std::optional<double> momentum;
  // Replaces Adam/AdamW/Lion beta2 for this step when set. DeepSpeed's OneCycle
  // with cycle_momentum writes betas = (momentum, 0.99) into the optimizer,
  // so its beta2 is 0.99 whatever the config said (LrScheduler::Beta2).
  std::optional<double> beta2;
};

// Optimizer state for one shard. Tensor names follow torch.optim / DeepSpeed
// checkpoints: "exp_avg", "exp_avg_sq" (Adam, AdamW), "exp_avg" (Lion),
// "momentum_buffer" (SGD), "sum" (Adagrad). `step` counts completed steps.
struct ShardState {
  int64_t step = 0;
  std::map<std::string, at::Tensor> tensors;
};

// kFast: one fused, vectorised pass over memory per step, split across
// intra-op threads (ops/kernels.h). kReference: the textbook formula per
// element in double precision, single-threaded; tests compare against it.
// Both run on CPU tensors only.
enum class Impl { kFast, kReference };

class ShardOptimizer {
 public:
  virtual ~ShardOptimizer() = default;
  virtual OptimizerType type() const = 0;
  // Zero-initialized state shaped like `params` (fp32, same device).
  virtual ShardState InitState(const at::Tensor& params) const = 0;
  // params <- update(params, grads). `params` and `grads` are contiguous fp32
  // tensors of equal numel; `grads` is final (averaged, unscaled, clipped).
  // Increments state.step before computing bias corrections, like torch.optim.
  virtual void Step(at::Tensor& params, const at::Tensor& grads, ShardState& state,
                    const StepHyper& hyper) const = 0;
};

// Builds the optimizer `config` describes (type, betas, eps, weight decay,
// adam_w_mode, momentum, ...).
std::unique_ptr<ShardOptimizer> MakeShardOptimizer(const OptimizerConfig& config,
                                                   Impl impl = Impl::kFast);

// OK if MakeShardOptimizer accepts `config`; otherwise InvalidArgument naming
// the key and the accepted range.
absl::Status ValidateOptimizerConfig(const OptimizerConfig& config);

}  // namespace zt::ops
