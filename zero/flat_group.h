// FlatGroup: the tensors of one parameter group (see zero/layout.h).
//
// The module's parameters become views into `params`, one flat buffer per
// group in the model's dtype, padded so each partition owns an equal shard.
// Gradients live either in a full flat buffer the parameters' .grad tensors
// view (stages 0 and 1, so autograd accumulates in place) or only as this
// rank's reduced shard (stages 2 and 3). Padding is always zero.
//
// Stage 3 adds `param_shard`: this rank's slice of the parameters, kept
// between uses, while `params` (the full buffer the parameters view) holds
// memory only while gathered (zero/storage.h). Persistent stage-3 chunks keep
// `params` gathered for good and, like stages 1/2, own a slice of it.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <vector>

#include "plan/layout.h"

namespace zt::zero {

struct FlatGroup {
  plan::GroupLayout layout;
  int partition = 0;     // which shard this rank owns (0 at stage 0)
  bool sharded = false;  // stages 1-3: this rank owns one shard; stage 0: everything

  at::Tensor params;       // [padded_numel], model dtype; parameters view into it
  at::Tensor grads;        // [padded_numel] stages 0/1; undefined at stage 2
  at::Tensor grad_shard;   // [shard_numel] stages 1-3: reduced local gradients
  at::Tensor param_shard;  // [shard_numel] stage 3 (not persistent): the owned parameters

  // Elements of `params` / full grads this rank updates: its shard when
  // sharded, else the whole buffer. OwnedParams() is `param_shard` when
  // defined (stage 3), else a view of `params`.
  int64_t owned_begin() const { return sharded ? layout.ShardBegin(partition) : 0; }
  int64_t owned_end() const { return sharded ? layout.ShardEnd(partition) : layout.padded_numel; }
  at::Tensor OwnedParams() const;
  // Reduced gradients for the owned elements: grad_shard when sharded, else grads.
  at::Tensor OwnedGrads() const;
};

// Creates the flat buffer for `layout`, copies each parameter's data into it
// and re-points the parameter at its view (Tensor::set_data keeps the same
// autograd leaf, so hooks and user references stay valid). The buffer has
// the parameters' dtype, or `dtype` when given (the copy converts).
FlatGroup FlattenParams(const plan::GroupLayout& layout, const std::vector<at::Tensor>& all_params, int partition,
                        bool sharded, std::optional<at::ScalarType> dtype = std::nullopt);

// Allocates the full flat gradient buffer (zeros) and sets each parameter's
// .grad to its view.
void AttachFlatGrads(FlatGroup& group, const std::vector<at::Tensor>& all_params);

// View of `flat` for one slot, shaped like the parameter.
at::Tensor SlotView(const at::Tensor& flat, const plan::ParamSlot& slot, const at::Tensor& like);

}  // namespace zt::zero
