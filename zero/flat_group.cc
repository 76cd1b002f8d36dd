// Implementation of zero/flat_group.h.
#include "zero/flat_group.h"

#include <ATen/ATen.h>

#include "util/status.h"

namespace zt::zero {

at::Tensor FlatGroup::OwnedParams() const {
  if (param_residency == ParamResidency::kShardOnly) return param_shard;
  return params.narrow(0, owned_begin(), owned_end() - owned_begin());
}

at::Tensor FlatGroup::OwnedGrads() const { return grad_residency == GradResidency::kFullFlat ? grads : grad_shard; }

at::Tensor SlotView(const at::Tensor& flat, const plan::ParamSlot& slot, const at::Tensor& like) {
  return flat.narrow(0, slot.offset, slot.numel).view(like.sizes());
}

FlatGroup FlattenParams(const plan::GroupLayout& layout, const std::vector<at::Tensor>& all_params, int partition,
                        ParamResidency residency, std::optional<at::ScalarType> dtype) {
  ZT_CHECK(residency != ParamResidency::kShardOnly);  // ShardChunk shards after its broadcast
  FlatGroup g;
  g.layout = layout;
  g.partition = partition;
  g.param_residency = residency;
  ZT_CHECK(!layout.slots.empty());
  const at::Tensor& first = all_params.at(static_cast<size_t>(layout.slots.front().param_index));
  // Every element but the padding is overwritten below: zero only the padding.
  g.params =
      at::empty({layout.padded_numel}, first.options().dtype(dtype.value_or(first.scalar_type())).requires_grad(false));
  at::NoGradGuard no_grad;
  g.params.narrow(0, layout.numel, layout.padded_numel - layout.numel).zero_();
  for (const plan::ParamSlot& slot : layout.slots) {
    const at::Tensor& p = all_params.at(static_cast<size_t>(slot.param_index));
    ZT_CHECK_MSG(dtype.has_value() || p.scalar_type() == first.scalar_type(),
                 "parameters of one group must share a dtype");
    at::Tensor view = SlotView(g.params, slot, p);
    view.copy_(p.detach());
    // set_data swaps the storage under the same Variable: the module, the
    // autograd graph and any user handle keep pointing at this parameter.
    at::Tensor param = p;
    param.set_data(view);
  }
  return g;
}

void AttachFlatGrads(FlatGroup& group, const std::vector<at::Tensor>& all_params) {
  group.grads = at::zeros({group.layout.padded_numel}, group.params.options());
  group.grad_residency = GradResidency::kFullFlat;
  for (const plan::ParamSlot& slot : group.layout.slots) {
    at::Tensor param = all_params.at(static_cast<size_t>(slot.param_index));
    param.mutable_grad() = SlotView(group.grads, slot, param);
  }
}

}  // namespace zt::zero
