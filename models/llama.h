// LLaMA with Hugging Face LlamaForCausalLM's parameter names: model.embed_tokens,
// model.layers.{i}.{self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj,
// input_layernorm, post_attention_layernorm}, model.norm, lm_head.
// Grouped-query attention, SwiGLU MLP, RMSNorm and rotary embeddings as in
// transformers' modeling_llama.py. The same code is Mistral's and Qwen2's
// (model_type): Qwen2 adds biases to q/k/v_proj; any of them may tie lm_head
// to embed_tokens. forward_cached: generation with a KV cache
// (models/kv_cache.h). Limits: no
// o_proj or MLP biases; no sliding window (models/catalog/hf_config.h caps the
// sequence length at the window instead).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "lora/lora_linear.h"
#include "models/catalog/llama_config.h"
#include "models/common.h"
#include "models/kv_cache.h"
#include "models/model.h"
#include "models/tied_lm_head.h"
#include "zero/unit.h"

namespace zt::models {

// RMSNorm as HF computes it: in float32, normalized, cast back to x's dtype,
// then times weight.
torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

// Rotary tables for positions 0..t-1: cos and sin, each [t, head_dim] in
// float32, the frequencies theta^(-2i/head_dim) (scaled as `scaling` says)
// concatenated twice (HF).
std::pair<torch::Tensor, torch::Tensor> RotaryCosSin(int64_t t, int64_t head_dim, double theta,
                                                     const torch::Device& device, const RopeScaling& scaling = {});
// x * cos + rotate_half(x) * sin, x: [..., t, head_dim]; rotate_half(x) is
// cat(-x2, x1) of x's two halves. cos/sin are cast to x's dtype.
torch::Tensor ApplyRotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

struct LlamaRmsNormImpl : torch::nn::Module {
  LlamaRmsNormImpl(int64_t dim, double eps);
  torch::Tensor forward(const torch::Tensor& x) { return RmsNorm(x, weight, eps); }
  double eps;
  torch::Tensor weight;  // ones
};
TORCH_MODULE(LlamaRmsNorm);

struct LlamaAttentionImpl : torch::nn::Module {
  explicit LlamaAttentionImpl(const LlamaConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const CausalLayout& layout);  // rotary computed here
  // x [B, t, C] after cache.length() positions; appends layer `layer`'s keys
  // (rotated) and values, n_kv_head heads each (repeated for the queries).
  torch::Tensor forward_cached(const torch::Tensor& x, KvCache& cache, size_t layer, const CausalLayout& layout);
  // The rotary cos / sin rows of `positions` [1 or B, T]: [1 or B, 1, T, head_dim].
  std::pair<torch::Tensor, torch::Tensor> RotaryRows(const torch::Tensor& positions, int64_t t,
                                                     const torch::Device& device) const;
  int64_t n_head, n_kv_head, head_dim;
  double rope_theta;
  RopeScaling rope_scaling;
  zt::LoraLinear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
};
TORCH_MODULE(LlamaAttention);

struct LlamaMlpImpl : torch::nn::Module {
  explicit LlamaMlpImpl(const LlamaConfig& c);
  torch::Tensor forward(const torch::Tensor& x);  // down(silu(gate(x)) * up(x))
  zt::LoraLinear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(LlamaMlp);

struct LlamaDecoderLayerImpl : torch::nn::Module {
  explicit LlamaDecoderLayerImpl(const LlamaConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const CausalLayout& layout);
  torch::Tensor forward_cached(const torch::Tensor& x, KvCache& cache, size_t layer, const CausalLayout& layout);
  LlamaAttention self_attn{nullptr};
  LlamaMlp mlp{nullptr};
  LlamaRmsNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
};

// model.*: embed_tokens, layers (each a zt::Unit), norm.
struct LlamaModelImpl : torch::nn::Module {
  explicit LlamaModelImpl(const LlamaConfig& c);
  // [B, T] -> hidden [B, T, C]; `documents`: packed rows (MakeCausalLayout), undefined: plain.
  torch::Tensor forward(const torch::Tensor& idx, const torch::Tensor& documents = {});
  // [B, t] after cache.length() positions -> hidden [B, t, C]; advances the cache.
  torch::Tensor forward_cached(const torch::Tensor& idx, KvCache& cache);
  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers_list{nullptr};           // names layers.0, layers.1, ...
  std::vector<zt::Unit<LlamaDecoderLayerImpl>> layers;  // the same modules, typed
  LlamaRmsNorm norm{nullptr};
};
TORCH_MODULE(LlamaModel);

struct LlamaForCausalLMImpl : torch::nn::Module {
  explicit LlamaForCausalLMImpl(const LlamaConfig& c);
  // [B, T] int64 -> logits [B, T, vocab]; `documents` as LlamaModel's.
  torch::Tensor forward(const torch::Tensor& idx);
  torch::Tensor forward(const torch::Tensor& idx, const torch::Tensor& documents);
  torch::Tensor forward_cached(const torch::Tensor& idx, KvCache& cache);  // Model::ForwardCached
  LlamaConfig config;
  LlamaModel model{nullptr};
  zt::LoraLinear lm_head{nullptr};   // untied
  TiedLmHead tied_lm_head{nullptr};  // tied (registered as lm_head too)
};

// Builds the model (the root is a unit too). The config must be valid.
std::unique_ptr<Model> CreateLlama(const ModelInfo& info, const LlamaConfig& c);

}  // namespace zt::models
