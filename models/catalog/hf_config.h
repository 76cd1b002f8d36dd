// A Hugging Face model's config.json -> the built-in architecture that
// computes the same function, so `zt train --init-from DIR` (or --model DIR)
// trains a model straight from its folder. Architectures: GPT2LMHeadModel
// (model_type gpt2) and the LLaMA family (llama, mistral, qwen2: grouped-
// query attention, rms_norm_eps, rope_theta, tied or untied head, Qwen2's
// q/k/v biases), and BERT (model_type bert) as BertForSequenceClassification:
// a BertModel, BertForMaskedLM or BertForPreTraining file builds the same
// classifier (its encoder; the head is new).
//
// Every key that changes the computation is checked: a value the built-in
// code does not compute (rope_scaling, attention_bias or mlp_bias on llama,
// another activation, a head_dim other than hidden_size / heads, GPT-2's
// scale_attn_by_inverse_layer_idx ...) is an InvalidArgument error naming
// the file and the key, never a silently different model. Keys that do not
// (token ids, torch_dtype, transformers_version, use_cache, ...) are ignored.
// A sliding window (Mistral) caps the sequence length at the window: for
// sequences that short, windowed and full causal attention are the same.
#pragma once

#include <string>
#include <variant>

#include "absl/status/statusor.h"
#include "models/catalog/bert_config.h"
#include "models/catalog/gpt2_config.h"
#include "models/catalog/llama_config.h"

namespace zt::models {

using HfArchitecture = std::variant<Gpt2Config, LlamaConfig, BertConfig>;

// `text`: config.json's contents; `where` names it in errors.
absl::StatusOr<HfArchitecture> ArchitectureFromHfConfig(const std::string& text, const std::string& where);

// The config.json inside `path` when `path` is a directory holding one, or
// `path` itself when it names a file called config.json; "" otherwise (a
// preset name, or a folder without a config).
std::string HfConfigPath(const std::string& path);

}  // namespace zt::models
