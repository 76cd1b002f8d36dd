// GPT-2 with Hugging Face GPT2LMHeadModel's parameter names and layouts, so
// its weights (a safetensors export) load into transformers and back:
// transformer.{wte,wpe,h.{i}.*,ln_f}.* and lm_head.weight, the LM head tied
// to the token embedding. Linear layers are HF's Conv1D (weight [in, out]).
// forward_cached: generation with a KV cache (models/kv_cache.h).
// Limits: learned absolute positions.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "lora/lora_layer.h"
#include "models/catalog/gpt2_config.h"
#include "models/common.h"
#include "models/kv_cache.h"
#include "models/model.h"
#include "models/tied_lm_head.h"
#include "zero/unit.h"

namespace zt::models {

// HF's Conv1D: y = x @ weight + bias with weight [nx, nf] (the transpose of
// torch::nn::Linear's). Initialized normal(0, init_std) and zero bias. Takes
// a LoRA adapter as PEFT does for GPT-2 (fan_in_fan_out).
struct Conv1DImpl : torch::nn::Module, zt::LoraLayer {
  Conv1DImpl(int64_t nx, int64_t nf, double init_std);
  torch::Tensor forward(const torch::Tensor& x);
  int64_t lora_in_features() const override { return weight.size(0); }
  int64_t lora_out_features() const override { return weight.size(1); }
  bool lora_fan_in_fan_out() const override { return true; }
  torch::Tensor weight, bias;
};
TORCH_MODULE(Conv1D);

struct Gpt2AttentionImpl : torch::nn::Module {
  explicit Gpt2AttentionImpl(const Gpt2Config& c);
  torch::Tensor forward(const torch::Tensor& x, const CausalLayout& layout);  // [B, T, C] -> [B, T, C]
  // x [B, t, C] after cache.length() positions; appends layer `layer`'s keys and values.
  torch::Tensor forward_cached(const torch::Tensor& x, KvCache& cache, size_t layer, const CausalLayout& layout);
  int64_t n_head;
  double dropout;
  Conv1D c_attn{nullptr}, c_proj{nullptr};
};
TORCH_MODULE(Gpt2Attention);

struct Gpt2MlpImpl : torch::nn::Module {
  explicit Gpt2MlpImpl(const Gpt2Config& c);
  torch::Tensor forward(const torch::Tensor& x);  // c_proj(gelu_new(c_fc(x)))
  double dropout;
  Conv1D c_fc{nullptr}, c_proj{nullptr};
};
TORCH_MODULE(Gpt2Mlp);

// One pre-LN transformer block: x + attn(ln_1(x)), then + mlp(ln_2(.)).
struct Gpt2BlockImpl : torch::nn::Module {
  explicit Gpt2BlockImpl(const Gpt2Config& c);
  torch::Tensor forward(const torch::Tensor& x, const CausalLayout& layout);
  torch::Tensor forward_cached(const torch::Tensor& x, KvCache& cache, size_t layer, const CausalLayout& layout);
  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  Gpt2Attention attn{nullptr};
  Gpt2Mlp mlp{nullptr};
};

// transformer.*: embeddings, the blocks (each a zt::Unit) and ln_f.
struct Gpt2TransformerImpl : torch::nn::Module {
  explicit Gpt2TransformerImpl(const Gpt2Config& c);
  // [B, T] -> hidden [B, T, C]; `documents`: packed rows (MakeCausalLayout), undefined: plain.
  torch::Tensor forward(const torch::Tensor& idx, const torch::Tensor& documents = {});
  // [B, t] after cache.length() positions -> hidden [B, t, C]; advances the cache.
  torch::Tensor forward_cached(const torch::Tensor& idx, KvCache& cache);
  double dropout;
  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  torch::nn::ModuleList h{nullptr};             // names h.0, h.1, ...
  std::vector<zt::Unit<Gpt2BlockImpl>> blocks;  // the same modules, typed
  torch::nn::LayerNorm ln_f{nullptr};
};
TORCH_MODULE(Gpt2Transformer);

struct Gpt2LMHeadModelImpl : torch::nn::Module {
  explicit Gpt2LMHeadModelImpl(const Gpt2Config& c);
  // [B, T] int64 -> logits [B, T, vocab]; `documents` as Gpt2Transformer's.
  torch::Tensor forward(const torch::Tensor& idx);
  torch::Tensor forward(const torch::Tensor& idx, const torch::Tensor& documents);
  torch::Tensor forward_cached(const torch::Tensor& idx, KvCache& cache);  // Model::ForwardCached
  Gpt2Config config;
  Gpt2Transformer transformer{nullptr};
  TiedLmHead lm_head{nullptr};
};

// Builds the model (the root is a unit too, so stage 3 shards the
// embeddings). The config must be valid; seeds nothing (the registry does).
std::unique_ptr<Model> CreateGpt2(const ModelInfo& info, const Gpt2Config& c);

}  // namespace zt::models
