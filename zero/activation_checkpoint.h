// zt::Checkpoint: activation checkpointing. A checkpointed function runs
// without keeping its intermediate activations; backward runs it again
// (recomputes) from its saved inputs and backpropagates through the result,
// trading about one extra forward for the activations' memory — DeepSpeed's
// checkpointing.checkpoint and torch.utils.checkpoint (re-entrant form).
//
//   torch::Tensor y = zt::Checkpoint([&](const torch::Tensor& h) { return mlp(ln(h)); }, x);
//
//   std::vector<torch::Tensor> outs = zt::CheckpointAll(
//       [&](const std::vector<torch::Tensor>& in) { return std::vector<torch::Tensor>{f(in[0], in[1]), g(in[0])}; },
//       {a, b});
//
// Whole units: zt::CheckpointUnits(model, number_checkpoints) marks units
// (zero/unit.h) whose forward then runs checkpointed.
//
// Contract:
//  * `fn` must compute the same thing when run again: RNG state (CPU, and the
//    CUDA devices of the inputs) is saved before the first run and restored
//    for the recomputation, so dropout draws the same mask. Everything `fn`
//    reads besides its inputs (parameters, captured tensors) must be
//    unchanged until backward. It must not keep tensors it computes, nor
//    change its inputs in place (autograd reports that at backward).
//  * Inputs that do not require grad (masks, indices) are fine, even all of
//    them (the first block, fed data): parameters inside still get their
//    gradients. Outputs that are not floating point are non-differentiable.
//  * Parameters get their gradients from a backward inside the backward. A
//    parameter used by several checkpointed calls in one forward therefore
//    gets several gradient contributions; stage 2/3 and overlap_comm reduce a
//    parameter's gradient as soon as it arrives, so they report that case as
//    an error (zero/grad_reducer.h) instead of losing a contribution.
//  * Inside stage-3 units, the unit's parameters are gathered again for the
//    recomputation by the same hooks as for backward (docs/stage3.md).
//
// Settings come from the config's activation_checkpointing block
// (ConfigureActivationCheckpointing, which Engine::Create calls):
//  * cpu_checkpointing: saved inputs of CUDA tensors go to pinned host memory
//    (asynchronously) and come back for the recomputation; CPU tensors are
//    in host memory already (said once in the log).
//  * contiguous_memory_optimization: saved inputs are copied into one buffer
//    that grows to what one backward needs and is then reused, instead of
//    many separate allocations.
//  * synchronize_checkpoint_boundary: the CUDA device synchronizes at each
//    checkpoint's start and end (timing, debugging); nothing on CPU.
//  * profile: forward and recompute time per checkpoint are summed for the
//    engine's step log (TakeCheckpointProfile).
//  * partition_activations splits saved inputs across tensor-parallel ranks
//    in DeepSpeed; without tensor parallelism there is nothing to split, and
//    the log says so once.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "config/config.h"

namespace zt {

using CheckpointFn = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;

namespace internal {
template <size_t... I>
auto AsTuple(const std::vector<at::Tensor>& v, std::index_sequence<I...>) {
  return std::forward_as_tuple(v[I]...);
}
}  // namespace internal

// Runs fn(inputs) checkpointed; returns its outputs.
std::vector<at::Tensor> CheckpointAll(const CheckpointFn& fn, const std::vector<at::Tensor>& inputs);

// One output, inputs as separate arguments: fn(const Tensor&...) -> Tensor.
template <typename F, typename... Ts>
at::Tensor Checkpoint(F&& fn, const Ts&... inputs) {
  static_assert((std::is_same_v<Ts, at::Tensor> && ...), "zt::Checkpoint takes tensors; capture other values in fn");
  CheckpointFn wrapped = [fn = std::forward<F>(fn)](const std::vector<at::Tensor>& in) {
    return std::apply([&fn](const auto&... t) { return std::vector<at::Tensor>{fn(t...)}; },
                      internal::AsTuple(in, std::index_sequence_for<Ts...>()));
  };
  return CheckpointAll(wrapped, {inputs...}).front();
}

// Applies the config's activation_checkpointing settings to every later
// checkpoint in this process.
void ConfigureActivationCheckpointing(const ActivationCheckpointingConfig& config);

// Time spent in checkpointed functions since the last call (profile on).
struct CheckpointProfile {
  int64_t calls = 0;
  double forward_ms = 0;
  double recompute_ms = 0;  // the recomputation's forward; its backward is not counted
};
CheckpointProfile TakeCheckpointProfile();

// True while a checkpoint recomputes or backpropagates through the
// recomputation (a backward inside a backward, on this thread).
bool InCheckpointRecompute();

// Bytes of saved checkpoint inputs alive now (for memory tests).
int64_t CheckpointSavedBytes();

}  // namespace zt
