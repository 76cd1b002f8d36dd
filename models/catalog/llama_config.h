// The dimensions of the built-in the LLaMA family (LlamaForCausalLM, Mistral, Qwen2), their checks and analytic
// parameter count: what the model catalog (models/catalog/catalog.h) resolves and
// sizes without LibTorch; models/llama.h builds the model from them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace zt::models {

// transformers' rope_scaling (modeling_rope_utils.py): "linear" divides
// every frequency by factor; "llama3" (Llama-3.1/3.2) divides the low
// frequencies (wavelength above original_max / low_freq_factor) by factor,
// keeps the high ones (below original_max / high_freq_factor) and blends in
// between. kNone: plain RoPE.
struct RopeScaling {
  enum class Type { kNone, kLinear, kLlama3 };
  Type type = Type::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  int64_t original_max_positions = 8192;                 // llama3
};

struct LlamaConfig {
  int64_t n_layer = 22;          // num_hidden_layers
  int64_t n_embd = 2048;         // hidden_size
  int64_t n_head = 32;           // num_attention_heads
  int64_t n_kv_head = 4;         // num_key_value_heads
  int64_t intermediate = 5632;   // intermediate_size
  int64_t max_positions = 2048;  // max_position_embeddings (override key: seq_len)
  int64_t vocab_size = 32000;    // override key: vocab
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  double initializer_range = 0.02;
  std::string model_type = "llama";  // llama, mistral or qwen2: the transformers class it maps to
  bool qkv_bias = false;             // biases on q_proj, k_proj, v_proj (Qwen2)
  bool tie_word_embeddings = false;  // lm_head.weight is model.embed_tokens.weight
};

absl::Status ValidateLlamaConfig(const std::string& name, const LlamaConfig& c);
int64_t LlamaNumParams(const LlamaConfig& c);

}  // namespace zt::models
