// ShardedOptimizer: fp32 master weights and optimizer state for the elements
// this rank owns (its shard of every group at stages 1/2, everything at
// stage 0), and the update that writes them back into the model's buffers.
//
// With an fp32 model the master weights are the owned parameters themselves
// (no copy): the optimizer updates the flat buffer in place. With bf16/fp16
// models they are an fp32 copy of the owned shard, rounded back after each
// step. Gradients are read from FlatGroup::OwnedGrads() and scaled in place.
#pragma once

#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "config/config.h"
#include "ops/shard_optimizer.h"
#include "zero/flat_group.h"

namespace zt::zero {

class ShardedOptimizer {
 public:
  ShardedOptimizer(std::vector<FlatGroup>& groups, const OptimizerConfig& config,
                   ops::Impl impl = ops::Impl::kFast);

  // Sum of squares of this rank's owned gradients, accumulated in double.
  double LocalGradSquaredNorm() const;
  // True if any owned gradient is inf or nan.
  bool LocalHasNonFinite() const;

  // master <- optimizer(master, grads * grad_multiplier); owned params <- master.
  void Step(double grad_multiplier, const ops::StepHyper& hyper);

  // Re-reads the owned parameters into the fp32 master copies, after the
  // parameters were written directly (GatheredParameters with a modifier).
  void RefreshMaster();
  // Rounds the fp32 masters back into the owned parameters (what Step ends
  // with), after the masters were set directly (a loaded checkpoint).
  void WriteBackParams();

  int64_t master_bytes() const;  // 0 where the master aliases the parameters
  int64_t state_bytes() const;

  // Checkpoint access: per group, the fp32 master shard and the state.
  const std::vector<at::Tensor>& master() const { return master_; }
  std::vector<ops::ShardState>& states() { return states_; }
  const std::vector<ops::ShardState>& states() const { return states_; }

 private:
  std::vector<FlatGroup>& groups_;
  std::unique_ptr<ops::ShardOptimizer> opt_;
  std::vector<at::Tensor> master_;
  std::vector<char> aliased_;
  std::vector<ops::ShardState> states_;
};

}  // namespace zt::zero
