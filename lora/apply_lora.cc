// Implementation of lora/apply_lora.h.
#include "lora/apply_lora.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lora/lora_layer.h"

namespace zt {
namespace {

// The last component of a dotted module path.
std::string LayerName(const std::string& path) {
  const size_t dot = path.find_last_of('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

bool HoldsData(const at::Tensor& t) { return t.numel() == 0 || t.storage().nbytes() > 0; }

}  // namespace

LoraScope::LoraScope(LoraOptions options) : options_(std::move(options)) {
  for (const std::string& t : options_.targets) {
    if (t != "all-linear") matched_[t] = 0;
  }
  hook_ = std::make_unique<UnitConstructionHook>([this](torch::nn::Module& unit) { Visit(unit, /*root=*/false); });
}

LoraScope::~LoraScope() = default;

void LoraScope::Visit(torch::nn::Module& module, bool root) {
  if (!options_.enabled()) return;
  for (const auto& item : module.named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    auto* layer = dynamic_cast<LoraLayer*>(item.value().get());
    if (layer == nullptr) continue;
    const std::string name = LayerName(item.key());
    if (root) ++capable_[name];
    if (layer->has_lora()) continue;  // done when its unit was built
    if (!IsLoraTarget(options_, name)) continue;
    at::Tensor base = item.value()->named_parameters(/*recurse=*/false)["weight"];
    if (!HoldsData(base)) {
      error_ = absl::StrCat("layer '", item.key(),
                            "' was sharded when its unit was built, before LoRA reached it: build the model inside "
                            "the zt::LoraScope (lora/apply_lora.h)");
      continue;
    }
    // Each adapter its own seed: torch's seed and the adapter's place in
    // construction order (the same on every rank).
    const uint64_t seed =
        at::detail::getDefaultCPUGenerator().current_seed() * 1000003u + static_cast<uint64_t>(layers_);
    layer->AddLora(*item.value(), options_, base, seed);
    ++layers_;
    if (auto m = matched_.find(name); m != matched_.end()) ++m->second;
    (layer->lora_fan_in_fan_out() ? fan_in_fan_out_ : fan_out_fan_in_)++;
  }
  // The base freezes before the unit shards: only adapters and the modules
  // to save stay trainable.
  for (auto& p : module.named_parameters(/*recurse=*/true)) {
    if (IsLoraSavedModuleParameter(options_, p.key())) {
      // The module names on its path (its own name, last, is not one).
      std::vector<std::string> parts = absl::StrSplit(p.key(), '.');
      saved_.insert(parts.begin(), parts.end() - 1);
      continue;
    }
    if (!IsLoraParameterName(p.key()) && p.value().requires_grad()) p.value().requires_grad_(false);
  }
}

absl::StatusOr<LoraSummary> LoraScope::Finish(torch::nn::Module& model) {
  hook_.reset();
  if (!options_.enabled()) return LoraSummary{};
  if (absl::Status st = ValidateLoraOptions(options_); !st.ok()) return st;
  Visit(model, /*root=*/true);
  if (!error_.empty()) return absl::FailedPreconditionError(error_);
  std::vector<std::string> names;
  for (const auto& [n, count] : capable_) names.push_back(n);
  if (capable_.empty()) {
    return absl::InvalidArgumentError(
        "LoRA: the model has no LoRA-capable layers (zt::LoraLinear, or a module deriving from zt::LoraLayer); "
        "torch::nn::Linear cannot take an adapter, since LibTorch modules have no forward hooks");
  }
  for (const auto& [target, count] : matched_) {
    if (count == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("lora target '", target,
                       "' matches no layer of the model; its LoRA-capable layers are: ", absl::StrJoin(names, ", ")));
    }
  }
  if (layers_ == 0) return absl::InvalidArgumentError("LoRA: no layer matched the targets");
  for (const std::string& m : options_.modules_to_save) {
    if (saved_.count(m) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("lora module to save '", m, "' matches no module with parameters in the model"));
    }
  }
  if (fan_in_fan_out_ > 0 && fan_out_fan_in_ > 0) {
    return absl::InvalidArgumentError(
        "LoRA: the targets mix [out, in] and [in, out] weight layouts (Linear and GPT-2's Conv1D); PEFT's "
        "adapter_config.json has one fan_in_fan_out for all: choose targets of one kind");
  }
  return SummarizeLora(model);
}

LoraSummary SummarizeLora(torch::nn::Module& model) {
  LoraSummary s;
  // Modules held on the stack cannot be listed with include_self.
  std::vector<const torch::nn::Module*> all = {&model};
  for (const auto& m : model.modules(/*include_self=*/false)) all.push_back(m.get());
  for (const torch::nn::Module* m : all) {
    const auto* layer = dynamic_cast<const LoraLayer*>(m);
    if (layer == nullptr || !layer->has_lora()) continue;
    ++s.layers;
    s.fan_in_fan_out = s.fan_in_fan_out || layer->lora_fan_in_fan_out();
  }
  std::unordered_set<const void*> seen;
  for (const at::Tensor& p : model.parameters(/*recurse=*/true)) {
    if (!seen.insert(p.unsafeGetTensorImpl()).second) continue;
    (p.requires_grad() ? s.trainable_numel : s.frozen_numel) += p.numel();
  }
  return s;
}

absl::StatusOr<LoraSummary> ApplyLora(torch::nn::Module& model, const LoraOptions& options) {
  LoraScope scope(options);
  return scope.Finish(model);
}

}  // namespace zt
