// LoRA's settings (Hu et al. 2021, as Hugging Face PEFT names them): rank r,
// alpha (the update is scaled by alpha / r), dropout on the adapter's input,
// and the layers that get adapters.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace zt {

struct LoraOptions {
  int64_t r = 0;       // adapter rank; 0: no LoRA
  double alpha = 8.0;  // PEFT's lora_alpha default
  double dropout = 0.0;
  // Layer names ("q_proj", "c_attn"), each matching every LoRA-capable layer
  // registered under that name, or {"all-linear"}: every LoRA-capable layer
  // except the output head (lm_head). Empty: the model's default (the
  // registry fills it: PEFT's defaults, q_proj/v_proj for LLaMA-style
  // models, c_attn for GPT-2).
  std::vector<std::string> targets;
  // PEFT's modules_to_save: modules (by their own name, like targets) whose
  // parameters stay trainable and are trained in full, without an adapter:
  // a task head that starts untrained, such as BERT's classifier, which
  // PEFT's SEQ_CLS task keeps trainable. Empty: the model's default (the
  // registry gives sequence classifiers {"classifier"}).
  std::vector<std::string> modules_to_save;

  bool enabled() const { return r > 0; }
  double scaling() const { return alpha / static_cast<double>(r); }
};

// InvalidArgument naming the option: r < 0, alpha <= 0, dropout outside
// [0, 1), or a target that is empty or a dotted path (targets are layer
// names: the engine may shard a block before its parents exist, so only the
// layer's own name is known then).
absl::Status ValidateLoraOptions(const LoraOptions& options);

// Whether the layer registered under `layer_name` (its own name, the last
// component of its path) gets an adapter: one of the targets, or with
// {"all-linear"} any layer but the output head, lm_head; never a module to
// save (trained in full instead).
bool IsLoraTarget(const LoraOptions& options, const std::string& layer_name);

// Whether parameter `name` (a full or relative dotted name) is a LoRA
// adapter's: its path has a component lora_A or lora_B.
bool IsLoraParameterName(const std::string& name);

// Whether parameter `name` belongs to one of options.modules_to_save: a
// component of its module path (the name without its last component) is one.
bool IsLoraSavedModuleParameter(const LoraOptions& options, const std::string& name);

// Whether parameter `name` stays trainable under LoRA: an adapter's, or a
// module to save's.
bool IsLoraTrainable(const LoraOptions& options, const std::string& name);

}  // namespace zt
