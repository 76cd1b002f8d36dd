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
//   // Fused: bf16 gradients still carrying the loss scale, bf16 model
//   // parameters refreshed in the same pass over memory.
//   zt::ops::StepExtras extras;
//   extras.grad_scale = clip_coef / loss_scale;
//   extras.out = bf16_param_shard;
//   opt->Step(master_shard, bf16_grad_shard, state, hyper, extras);
//
// Thread-safety: a ShardOptimizer is immutable after creation; Step mutates
// only the tensors passed to it. Step may use intra-op threads (at::parallel_for,
// as many as at::get_num_threads() of the calling thread).
//
// Kernels: kFast runs the ISA variant kernels::ActiveKernels() picked for this
// CPU (or ZT_CPU_ISA); every variant computes the same bits (ops/kernels.h).
//
// Errors: a config the optimizers cannot run (negative lr, beta outside [0, 1),
// nesterov without momentum, ...) makes MakeShardOptimizer throw zt::Error
// (InvalidArgument, naming the "optimizer.params" key); ValidateOptimizerConfig
// returns the same Status without throwing; a ZT_CPU_ISA this CPU cannot run
// makes a kFast MakeShardOptimizer throw zt::Error (FailedPrecondition). Step
// throws zt::Error (InvalidArgument / FailedPrecondition) for tensors that
// break its contract (dtype, device, size, missing state, overlapping
// buffers) and leaves everything unchanged then.
// Update formulas and DeepSpeed semantics: docs/optimizers.md.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "config/config.h"
#include "ops/impl.h"

namespace zt::ops {

namespace kernels {
struct KernelTable;  // ops/kernels.h
}  // namespace kernels

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

// What one step does besides the update itself, in the same pass over memory.
struct StepExtras {
  // Every gradient element is multiplied by this (in fp32) before use: the
  // engine's 1 / loss_scale times the clipping coefficient. The gradient
  // tensor itself is not modified.
  double grad_scale = 1.0;
  // When defined: a contiguous CPU tensor of params.numel() elements (bf16,
  // fp16 or fp32) that receives the updated fp32 parameters rounded to its
  // dtype (round to nearest even, bit-identical to Tensor::to): the model's
  // own low-precision parameters, written without a second pass.
  at::Tensor out;
};

class ShardOptimizer {
 public:
  virtual ~ShardOptimizer() = default;
  virtual OptimizerType type() const = 0;
  // Zero-initialized state shaped like `params` (fp32, same device).
  virtual ShardState InitState(const at::Tensor& params) const = 0;
  // params <- update(params, grads * extras.grad_scale); extras.out <- params.
  // `params` is a contiguous fp32 CPU tensor; `grads` a contiguous CPU tensor
  // of equal numel in fp32, bf16 or fp16, averaged but possibly still scaled
  // (extras.grad_scale undoes that), sharing no memory with params. extras.out
  // may be params itself (nothing extra is written) but may not otherwise
  // overlap params, grads or the state. State tensors are written in place
  // through their data pointers, never replaced, so they may view foreign
  // memory (at::from_blob over swap buffers). Increments state.step before
  // computing bias corrections, like torch.optim. On a bad argument throws
  // zt::Error and changes nothing.
  virtual void Step(at::Tensor& params, const at::Tensor& grads, ShardState& state, const StepHyper& hyper,
                    const StepExtras& extras) const = 0;
  // The split update: the same step in two passes, so that the first can
  // run without the parameters (ZeRO-3 with parameter shards on NVMe
  // updates the state during backward and the parameters where the next
  // forward reads them anyway). Only where the state's update does not read
  // the parameters: AdamW (decoupled decay) and Lion.
  virtual bool SplitsUpdate() const { return false; }
  // First pass: the state as Step updates it (state.step included) from
  // grads * grad_scale; `grads` (a contiguous fp32 CPU tensor) is then
  // overwritten with the step's increment. Throws zt::Error like Step, and
  // FailedPrecondition where SplitsUpdate() is false.
  virtual void StepMoments(at::Tensor& grads, ShardState& state, const StepHyper& hyper, double grad_scale) const;
  // Second pass: params <- params * (1 - hyper.lr * weight_decay) -
  // increment. With the hyperparameters of the first pass, params end as
  // Step would leave them: bit for bit on kFast, within the reference's
  // double rounding on kReference.
  virtual void ApplyIncrement(at::Tensor& params, const at::Tensor& increment, const StepHyper& hyper) const;

  // The plain step: fp32 gradients used as given, no rounded copy.
  void Step(at::Tensor& params, const at::Tensor& grads, ShardState& state, const StepHyper& hyper) const {
    Step(params, grads, state, hyper, StepExtras());
  }
};

// Builds the optimizer `config` describes (type, betas, eps, weight decay,
// adam_w_mode, momentum, ...). kFast binds kernels::ActiveKernels(), so a
// ZT_CPU_ISA this CPU cannot run makes it throw zt::Error (FailedPrecondition).
std::unique_ptr<ShardOptimizer> MakeShardOptimizer(const OptimizerConfig& config, Impl impl = Impl::kFast);

// kFast on a given ISA variant (kernels::KernelsFor) instead of the active
// one: for tests and benchmarks that compare variants.
std::unique_ptr<ShardOptimizer> MakeShardOptimizer(const OptimizerConfig& config, const kernels::KernelTable& kernels);

// OK if MakeShardOptimizer accepts `config`; otherwise InvalidArgument naming
// the key and the accepted range.
absl::Status ValidateOptimizerConfig(const OptimizerConfig& config);

}  // namespace zt::ops
