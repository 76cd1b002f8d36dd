// The built-in models by name, without LibTorch: presets (gpt2-tiny ...
// gpt2-xl, llama-tiny ... llama-7b, bert-tiny ... bert-large, mnist-cnn) and
// Hugging Face model folders (config.json), with integer overrides of their
// dimensions, resolved and checked. What `zt estimate` sizes and
// models/registry.h's CreateModel builds.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "config/lora_options.h"
#include "models/catalog/bert_config.h"
#include "models/catalog/gpt2_config.h"
#include "models/catalog/llama_config.h"
#include "models/catalog/mnist_cnn_config.h"
#include "models/catalog/model_info.h"

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

using ModelConfig = std::variant<Gpt2Config, LlamaConfig, BertConfig, MnistConfig>;

// A spec resolved: the preset or folder's dimensions with the overrides
// applied and checked, and what they make.
struct ResolvedModel {
  ModelInfo info;
  ModelConfig config;
};

// Errors (InvalidArgument): an unknown name (lists the known ones), an
// override key the model does not have (lists its keys), dimensions that do
// not fit (names the key and what to change), a folder's unreadable or
// unsupported config.json.
absl::StatusOr<ResolvedModel> ResolveModel(const ModelSpec& spec);

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
