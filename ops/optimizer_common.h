// Pieces every ShardOptimizer implementation shares: argument checks that
// throw zt::Error, state-tensor lookup, the kernel-level views of the
// gradient and of StepExtras::out, tile-aligned intra-op chunking, and the
// per-type constructors the factory in shard_optimizer.cc calls. Internal to ops/.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "config/config.h"
#include "ops/kernels.h"
#include "ops/shard_optimizer.h"

namespace zt::ops::internal {

// DeepSpeed's spelling of the type ("Adam", "AdamW", "Adagrad", "Lion", "SGD").
const char* OptimizerName(OptimizerType type);

// Throws zt::Error (InvalidArgument) unless `params` is a defined, contiguous
// fp32 CPU tensor; `grads` a contiguous fp32, bf16 or fp16 CPU tensor with the
// same numel that shares no memory with params; `hyper` holds a finite
// lr >= 0 and, when set, momentum / beta2 in [0, 1); extras.grad_scale is
// finite in float; and extras.out, when defined, is a contiguous fp32, bf16
// or fp16 CPU tensor of params.numel() elements that is either params itself
// or shares no memory with params or grads.
void CheckStepArgs(const char* optimizer, const at::Tensor& params, const at::Tensor& grads, const StepHyper& hyper,
                   const StepExtras& extras);

// ShardOptimizer::StepMoments's checks, throwing zt::Error (InvalidArgument):
// `grads` a contiguous fp32 CPU tensor; `hyper` and grad_scale as for
// CheckStepArgs.
void CheckMomentsArgs(const char* optimizer, const at::Tensor& grads, const StepHyper& hyper, double grad_scale);

// ShardOptimizer::ApplyIncrement for the optimizers with a split update:
// checks its arguments (InvalidArgument unless params and increment are
// separate contiguous fp32 CPU tensors of one numel and `hyper` is valid),
// then params <- params * (1 - lr * weight_decay) - increment with
// `kernels` (chunked over the intra-op threads) or, when null, in double per
// element (the reference).
void ApplyIncrementWith(const kernels::KernelTable* kernels, const char* optimizer, at::Tensor& params,
                        const at::Tensor& increment, const StepHyper& hyper, double weight_decay);

// The state tensor `name`, checked to be a contiguous fp32 CPU tensor with
// params.numel() elements that shares no memory with params, grads or
// extras.out; throws zt::Error (FailedPrecondition) if it is missing or does
// not fit (e.g. a checkpoint of another shard size). The tensor may view
// foreign memory (from_blob over a swap buffer): callers only write through
// its data pointer, never replace it.
at::Tensor& StateTensor(const char* optimizer, ShardState& state, const std::string& name, const at::Tensor& params,
                        const at::Tensor& grads, const StepExtras& extras);

// fp32 zeros with the shape and device of `params` (optimizer state).
at::Tensor ZerosLikeParams(const at::Tensor& params);

// The gradient as the kernels see it (after CheckStepArgs).
kernels::GradIn GradArg(const at::Tensor& grads, const StepExtras& extras);

// Where the kernels write the rounded parameters: null data when extras.out
// is undefined or is params itself (then the update already wrote it).
kernels::ParamOut OutArg(const at::Tensor& params, const StepExtras& extras);

// The reference paths' view of the gradient: fp32 (exact for bf16 / fp16).
at::Tensor GradsAsFloat(const at::Tensor& grads);

// The reference paths' extras.out: out <- params rounded by LibTorch's own
// conversion (Tensor::copy_), unless out is undefined or params itself.
void WriteOutWithTorch(const at::Tensor& params, const StepExtras& extras);

// The bf16 bits Tensor::to(kBFloat16) writes for NaN in this process: they
// depend on LibTorch's CPU capability dispatch (0x7FC0 from the scalar
// conversion, 0xFFFF from its AVX2 one), so they are measured once.
uint16_t TorchBf16NaNBits();

// Calls fn(begin, end) on disjoint chunks covering [0, n), in parallel on the
// intra-op thread pool (at::parallel_for, i.e. OpenMP with as many threads as
// at::get_num_threads() on the calling thread). Chunk boundaries are
// multiples of kernels::kTile (all chunks but the last are whole tiles), and
// chunks are at least kGrainSize elements so small shards stay on the calling
// thread. Defined in for_each_chunk.cc, the one file built with -fopenmp.
inline constexpr int64_t kGrainSize = 32768;
static_assert(kGrainSize % kernels::kTile == 0, "a grain is whole tiles");
void ForEachChunk(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn);

// `kernels` null: Impl::kReference; else the fast path on that ISA variant.
std::unique_ptr<ShardOptimizer> MakeAdam(const OptimizerConfig& config, const kernels::KernelTable* kernels);
std::unique_ptr<ShardOptimizer> MakeSgd(const OptimizerConfig& config, const kernels::KernelTable* kernels);
std::unique_ptr<ShardOptimizer> MakeAdagrad(const OptimizerConfig& config, const kernels::KernelTable* kernels);
std::unique_ptr<ShardOptimizer> MakeLion(const OptimizerConfig& config, const kernels::KernelTable* kernels);

}  // namespace zt::ops::internal
