// FlatGroup: the tensors of one parameter group (see zero/layout.h).
//
// The module's parameters become views into `params`, one flat buffer per
// group in the model's dtype, padded so each partition owns an equal shard.
// Gradients live either in a full flat buffer the parameters' .grad tensors
// view (stages 0 and 1, so autograd accumulates in place) or only as this
// rank's reduced shard (stage 2). Padding is always zero.
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

#include "zero/layout.h"

namespace zt::zero {

struct FlatGroup {
  GroupLayout layout;
  int partition = 0;          // which shard this rank owns (0 at stage 0)
  bool sharded = false;       // stages 1/2: this rank owns one shard; stage 0: everything

  at::Tensor params;          // [padded_numel], model dtype; parameters view into it
  at::Tensor grads;           // [padded_numel] stages 0/1; undefined at stage 2
  at::Tensor grad_shard;      // [shard_numel] stages 1/2: reduced local gradients

  // Elements of `params` / full grads this rank updates: its shard when
  // sharded, else the whole buffer.
  int64_t owned_begin() const { return sharded ? layout.ShardBegin(partition) : 0; }
  int64_t owned_end() const { return sharded ? layout.ShardEnd(partition) : layout.padded_numel; }
  at::Tensor OwnedParams() const;
  // Reduced gradients for the owned elements: grad_shard when sharded, else grads.
  at::Tensor OwnedGrads() const;
};

// Creates the flat buffer for `layout`, copies each parameter's data into it
// and re-points the parameter at its view (Tensor::set_data keeps the same
// autograd leaf, so hooks and user references stay valid).
FlatGroup FlattenParams(const GroupLayout& layout, const std::vector<at::Tensor>& all_params,
                        int partition, bool sharded);

// Allocates the full flat gradient buffer (zeros) and sets each parameter's
// .grad to its view.
void AttachFlatGrads(FlatGroup& group, const std::vector<at::Tensor>& all_params);

// View of `flat` for one slot, shaped like the parameter.
at::Tensor SlotView(const at::Tensor& flat, const ParamSlot& slot, const at::Tensor& like);

}  // namespace zt::zero
