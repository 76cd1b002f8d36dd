// FlatGroup: the tensors of one parameter group (see plan/layout.h).
//
// The module's parameters become views into `params`, one flat buffer per
// group in the model's dtype, padded so each partition owns an equal shard.
// Padding is always zero. Which of the tensors exist, and what they hold, is
// stated by two enums set where the group is built (FlattenParams,
// AttachFlatGrads, ShardChunk in zero/stage3_setup.h, the engine's gradient
// setup); code asks them instead of inferring the stage from which tensors
// are defined():
//
//   stage                     param_residency    grad_residency
//   0                         kFull              kFullFlat
//   1                         kOwnsSliceOfFull   kFullFlatOwnedSlice
//   2                         kOwnsSliceOfFull   kShardOnly
//   3, persistent chunk       kOwnsSliceOfFull   kShardOnly (frozen chunk: kNone)
//   3, sharded chunk          kShardOnly         kShardOnly (frozen chunk: kNone)
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <vector>

#include "plan/layout.h"
#include "plan/stage_sharding.h"

namespace zt::zero {

// Where a group's parameter values live, and which of them this rank updates.
enum class ParamResidency {
  // Stage 0: `params` is the full buffer and always holds memory; this rank
  // updates all of it (no shard, partition 0).
  kFull,
  // Stages 1-2 and persistent stage-3 chunks: `params` is the full buffer and
  // always holds memory; this rank updates [owned_begin, owned_end) in place
  // and the other ranks' slices arrive by an all-gather after the step.
  kOwnsSliceOfFull,
  // Stage 3, sharded chunks: `param_shard` holds this rank's slice between
  // uses (its memory may be on loan from a swap buffer, or absent while the
  // shard is offloaded to NVMe); `params` keeps its shape but holds memory
  // only while the coordinator has it gathered (zero/storage.h).
  kShardOnly,
};

// Where a group's gradients live.
enum class GradResidency {
  // No gradient buffers: frozen stage-3 chunks, and every group until the
  // engine's setup attaches them.
  kNone,
  // Stage 0: `grads` is the full flat buffer the parameters' .grad view
  // (autograd accumulates in place); it is all-reduced whole.
  kFullFlat,
  // Stage 1: `grads` as at stage 0, reduce-scattered at the accumulation
  // boundary into `grad_shard`, a view of this rank's slice of `grads`.
  kFullFlatOwnedSlice,
  // Stages 2-3: no full buffer; `grad_shard` ([shard_numel], in
  // grad_accum_dtype) holds this rank's reduced gradients.
  kShardOnly,
};

// The residency of the trainable groups' gradients under a stage's sharding:
// the one place that maps it (the engine's setup attaches them so;
// GradReducer checks them against it and then asks the residency only).
inline GradResidency GradResidencyFor(plan::StageSharding sharding) {
  return sharding.gradients()         ? GradResidency::kShardOnly
         : sharding.optimizer_state() ? GradResidency::kFullFlatOwnedSlice
                                      : GradResidency::kFullFlat;
}

struct FlatGroup {
  plan::GroupLayout layout;
  int partition = 0;  // which shard this rank owns (0 with ParamResidency::kFull)
  ParamResidency param_residency = ParamResidency::kFull;
  GradResidency grad_residency = GradResidency::kNone;

  at::Tensor params;       // [padded_numel], model dtype; parameters view into it
  at::Tensor grads;        // [padded_numel] with GradResidency::kFullFlat*, else undefined
  at::Tensor grad_shard;   // [shard_numel] with kFullFlatOwnedSlice / kShardOnly: reduced local gradients
  at::Tensor param_shard;  // [shard_numel] with ParamResidency::kShardOnly: the owned parameters

  // This rank owns one shard (any residency but kFull).
  bool sharded() const { return param_residency != ParamResidency::kFull; }
  // Elements of `params` / full grads this rank updates: its shard when
  // sharded, else the whole buffer. OwnedParams() is `param_shard` with
  // ParamResidency::kShardOnly, else a view of `params`.
  int64_t owned_begin() const { return sharded() ? layout.ShardBegin(partition) : 0; }
  int64_t owned_end() const { return sharded() ? layout.ShardEnd(partition) : layout.padded_numel; }
  at::Tensor OwnedParams() const;
  // Reduced gradients for the owned elements: `grads` with kFullFlat, else
  // `grad_shard` (undefined with kNone).
  at::Tensor OwnedGrads() const;
};

// Creates the flat buffer for `layout`, copies each parameter's data into it
// and re-points the parameter at its view (Tensor::set_data keeps the same
// autograd leaf, so hooks and user references stay valid). The buffer has
// the parameters' dtype, or `dtype` when given (the copy converts).
// `residency` is kFull (stage 0) or kOwnsSliceOfFull (stages 1-3; ShardChunk
// then makes a sharded chunk kShardOnly). The group has no gradients (kNone).
FlatGroup FlattenParams(const plan::GroupLayout& layout, const std::vector<at::Tensor>& all_params, int partition,
                        ParamResidency residency, std::optional<at::ScalarType> dtype = std::nullopt);

// Allocates the full flat gradient buffer (zeros), sets each parameter's
// .grad to its view and makes the group GradResidency::kFullFlat (stage 1
// then adds the owned-slice view: kFullFlatOwnedSlice).
void AttachFlatGrads(FlatGroup& group, const std::vector<at::Tensor>& all_params);

// View of `flat` for one slot, shaped like the parameter.
at::Tensor SlotView(const at::Tensor& flat, const plan::ParamSlot& slot, const at::Tensor& like);

}  // namespace zt::zero
