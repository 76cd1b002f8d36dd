// Implementation of engine/weight_decay_groups.h.
#include "engine/weight_decay_groups.h"

#include <torch/nn/modules/normalization.h>

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace zt {

bool NoDecayByName(const std::string& name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (absl::StrContains(lower, "bias") || absl::StrContains(lower, "layernorm") ||
      absl::StrContains(lower, "rmsnorm")) {
    return true;
  }
  // (^|\.)norm($|\.) and _norm($|\.): a dotted part that is "norm" or ends in "_norm".
  for (absl::string_view part : absl::StrSplit(lower, '.')) {
    if (part == "norm" || absl::EndsWith(part, "_norm")) return true;
  }
  return false;
}

std::vector<ParamGroupOptions> WeightDecayGroups(torch::nn::Module& module, double weight_decay) {
  // Parameters held by LayerNorm modules (at any depth), by tensor.
  std::set<const void*> in_layer_norm;
  for (const auto& item : module.named_modules(/*name_prefix=*/"", /*include_self=*/true)) {
    if (dynamic_cast<const torch::nn::LayerNormImpl*>(item.value().get()) == nullptr) continue;
    for (const auto& p : item.value()->parameters(/*recurse=*/true)) in_layer_norm.insert(p.unsafeGetTensorImpl());
  }
  ParamGroupOptions decay, no_decay;
  decay.name = "decay";
  decay.weight_decay = weight_decay;
  no_decay.name = "no_decay";
  no_decay.weight_decay = 0.0;
  std::set<const void*> seen;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    const at::Tensor& p = item.value();
    if (!p.requires_grad() || !seen.insert(p.unsafeGetTensorImpl()).second) continue;
    const bool none = in_layer_norm.count(p.unsafeGetTensorImpl()) != 0 || NoDecayByName(item.key());
    (none ? no_decay : decay).params.push_back(item.key());
  }
  std::vector<ParamGroupOptions> out;
  if (!decay.params.empty()) out.push_back(std::move(decay));
  if (!no_decay.params.empty()) out.push_back(std::move(no_decay));
  return out;
}

}  // namespace zt
