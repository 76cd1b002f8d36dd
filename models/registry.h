// The built-in models by name: presets (gpt2-tiny ... gpt2-xl, llama-tiny ...
// llama-7b, bert-tiny ... bert-large, mnist-cnn) with integer overrides of their dimensions. What
// `zt train` builds and `zt estimate` sizes.
//
//   ModelSpec spec{"gpt2-tiny", {{"n_layer", 4}}, /*seed=*/1};
//   ZT_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, CreateModel(spec));
//   ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(model->module(), config, pg));
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lora/lora_options.h"
#include "models/model.h"

namespace zt::models {

struct ModelSpec {
  std::string name;  // a preset, see ModelNames()
  // Dimension overrides, by key: GPT-2: n_layer, n_embd, n_head, seq_len,
  // vocab, dropout (percent); LLaMA: n_layer, n_embd, n_head, n_kv_head,
  // intermediate, seq_len, vocab; BERT: n_layer, n_embd, n_head,
  // intermediate, seq_len, vocab, num_labels, dropout (percent); mnist-cnn:
  // none.
  std::map<std::string, int64_t> overrides;
  uint64_t seed = 1;  // torch::manual_seed before construction: same seed, same weights
  // LoRA adapters (off when lora.r == 0): the base is frozen, the targets'
  // adapters are the only trainable parameters (lora/apply_lora.h).
  LoraOptions lora{};
};

// spec.lora with the model's default targets filled in (PEFT's: q_proj and
// v_proj for LLaMA-style models, c_attn for GPT-2, query and value for
// BERT), checked.
// InvalidArgument for bad options or a model without LoRA-capable layers
// (mnist-cnn). Off (r == 0) stays off.
absl::StatusOr<LoraOptions> ResolveLora(const ModelSpec& spec);

// Builds the model (float32, CPU), with LoRA adapters when spec.lora.r > 0
// (inside a LoraScope, so it works under zt::ShardedInit). Errors
// (InvalidArgument): bad LoRA options, an unknown name
// (lists the known ones), an override key the model does not have (lists its
// keys), dimensions that do not fit (names the key and what to change).
// Reseeds torch's global generator with spec.seed.
absl::StatusOr<std::unique_ptr<Model>> CreateModel(const ModelSpec& spec);

// The model's info with the same checks as CreateModel, building nothing
// (fine for billions of parameters).
absl::StatusOr<ModelInfo> DescribeModel(const ModelSpec& spec);

// The Hugging Face transformers config.json for the model (GPT2LMHeadModel,
// LlamaForCausalLM and its family, BertForSequenceClassification), so `from_pretrained(dir)` loads a directory holding
// it and our safetensors export; "" for models with no transformers counterpart (mnist-cnn). Same checks as
// DescribeModel.
absl::StatusOr<std::string> HfConfigJson(const ModelSpec& spec);

// The preset names, in help order.
std::vector<std::string> ModelNames();

// One line per preset: name, parameter count, dimensions.
std::string ModelHelp();

}  // namespace zt::models
