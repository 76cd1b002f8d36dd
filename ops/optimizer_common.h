// Pieces every ShardOptimizer implementation shares: argument checks that
// throw zt::Error, state-tensor lookup, intra-op chunking, and the per-type
// constructors the factory in shard_optimizer.cc calls. Internal to ops/.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>

#include "config/config.h"
#include "ops/shard_optimizer.h"

namespace zt::ops::internal {

// DeepSpeed's spelling of the type ("Adam", "AdamW", "Adagrad", "Lion", "SGD").
const char* OptimizerName(OptimizerType type);

// Throws zt::Error (InvalidArgument) unless `params` and `grads` are defined,
// distinct, contiguous fp32 CPU tensors with equal numel, and `hyper` holds a
// finite lr >= 0 and, when set, momentum / beta2 in [0, 1).
void CheckStepArgs(const char* optimizer, const at::Tensor& params, const at::Tensor& grads,
                   const StepHyper& hyper);

// The state tensor `name`, checked to be a contiguous fp32 CPU tensor with
// params.numel() elements; throws zt::Error (FailedPrecondition) if it is
// missing or does not fit (e.g. a checkpoint of another shard size).
at::Tensor& StateTensor(const char* optimizer, ShardState& state, const std::string& name,
                        const at::Tensor& params);

// fp32 zeros with the shape and device of `params` (optimizer state).
at::Tensor ZerosLikeParams(const at::Tensor& params);

// Calls fn(begin, end) on disjoint chunks covering [0, n), in parallel on the
// intra-op thread pool; chunks are at least kGrainSize elements so small
// shards stay on the calling thread.
inline constexpr int64_t kGrainSize = 32768;
template <typename Fn>
void ForEachChunk(int64_t n, const Fn& fn) {
  if (n == 0) return;
  at::parallel_for(0, n, kGrainSize, fn);
}

std::unique_ptr<ShardOptimizer> MakeAdam(const OptimizerConfig& config, Impl impl);
std::unique_ptr<ShardOptimizer> MakeSgd(const OptimizerConfig& config, Impl impl);
std::unique_ptr<ShardOptimizer> MakeAdagrad(const OptimizerConfig& config, Impl impl);
std::unique_ptr<ShardOptimizer> MakeLion(const OptimizerConfig& config, Impl impl);

}  // namespace zt::ops::internal
