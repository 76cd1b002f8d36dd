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
//   opt->Step(master_shard, grad_shard, state, {.lr = scheduler_lr});
//
// Thread-safety: a ShardOptimizer is immutable after creation; Step mutates
// only the tensors passed to it. Step may use intra-op threads (at::parallel_for).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <ATen/core/Tensor.h>

#include "config/config.h"

namespace zt::ops {

// Hyper-parameters that may change every step (a scheduler drives them).
struct StepHyper {
  double lr = 0.0;
  // OneCycle momentum cycling: replaces Adam/AdamW/Lion beta1 or SGD momentum
  // for this step when set.
  std::optional<double> momentum;
};

// Optimizer state for one shard. Tensor names follow torch.optim / DeepSpeed
// checkpoints: "exp_avg", "exp_avg_sq" (Adam, AdamW), "exp_avg" (Lion),
// "momentum_buffer" (SGD), "sum" (Adagrad). `step` counts completed steps.
struct ShardState {
  int64_t step = 0;
  std::map<std::string, at::Tensor> tensors;
};

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

}  // namespace zt::ops
