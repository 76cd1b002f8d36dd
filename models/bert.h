// BERT with Hugging Face BertForSequenceClassification's parameter names, so
// its weights (a safetensors export) load into transformers and back:
// bert.embeddings.{word,position,token_type}_embeddings.weight,
// bert.embeddings.LayerNorm.*, bert.encoder.layer.{i}.{attention.self.
// {query,key,value}, attention.output.{dense,LayerNorm}, intermediate.dense,
// output.{dense,LayerNorm}}.*, bert.pooler.dense.*, classifier.*. The math
// is transformers' modeling_bert.py (eager attention): post-LN encoder
// layers, exact (erf) GELU, an additive key mask of (1 - mask) *
// finfo(dtype).min, a tanh pooler over the first position ([CLS]).
//
// Limits: single-sentence inputs only -- every position takes token type 0
// (sentence pairs, token_type_ids = 1, are not computed); absolute learned
// positions only (no relative position_embedding_type); an encoder only (no
// decoder use, cross-attention or KV cache); single-label classification
// (no regression, no multi-label head).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "lora/lora_linear.h"
#include "models/catalog/bert_config.h"
#include "models/model.h"
#include "zero/unit.h"

namespace zt::models {

// word + position(0..T-1) + token_type(0), LayerNorm, dropout.
struct BertEmbeddingsImpl : torch::nn::Module {
  explicit BertEmbeddingsImpl(const BertConfig& c);
  torch::Tensor forward(const torch::Tensor& ids);  // [B, T] -> [B, T, C]
  double dropout;
  torch::nn::Embedding word_embeddings{nullptr}, position_embeddings{nullptr}, token_type_embeddings{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};  // NOLINT: HF's name
};
TORCH_MODULE(BertEmbeddings);

// Multi-head self-attention with an additive key mask [B, 1, 1, T].
struct BertSelfAttentionImpl : torch::nn::Module {
  explicit BertSelfAttentionImpl(const BertConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& additive_mask);
  int64_t n_head;
  double dropout;
  zt::LoraLinear query{nullptr}, key{nullptr}, value{nullptr};
};
TORCH_MODULE(BertSelfAttention);

// LayerNorm(dropout(dense(x)) + residual): BertSelfOutput and BertOutput.
struct BertResidualOutputImpl : torch::nn::Module {
  BertResidualOutputImpl(const BertConfig& c, int64_t in);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& residual);
  double dropout;
  zt::LoraLinear dense{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};  // NOLINT: HF's name
};
TORCH_MODULE(BertResidualOutput);

struct BertAttentionImpl : torch::nn::Module {
  explicit BertAttentionImpl(const BertConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& additive_mask);
  BertSelfAttention self_attention{nullptr};  // registered as "self"
  BertResidualOutput output{nullptr};
};
TORCH_MODULE(BertAttention);

// gelu(dense(x)), the exact erf GELU (hidden_act "gelu").
struct BertIntermediateImpl : torch::nn::Module {
  explicit BertIntermediateImpl(const BertConfig& c);
  torch::Tensor forward(const torch::Tensor& x);
  zt::LoraLinear dense{nullptr};
};
TORCH_MODULE(BertIntermediate);

// One encoder layer (a zt::Unit): attention, then the feed-forward block.
struct BertLayerImpl : torch::nn::Module {
  explicit BertLayerImpl(const BertConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& additive_mask);
  BertAttention attention{nullptr};
  BertIntermediate intermediate{nullptr};
  BertResidualOutput output{nullptr};
};

struct BertEncoderImpl : torch::nn::Module {
  explicit BertEncoderImpl(const BertConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& additive_mask);
  torch::nn::ModuleList layer_list{nullptr};   // names layer.0, layer.1, ...
  std::vector<zt::Unit<BertLayerImpl>> layer;  // the same modules, typed
};
TORCH_MODULE(BertEncoder);

// tanh(dense(h[:, 0])).
struct BertPoolerImpl : torch::nn::Module {
  explicit BertPoolerImpl(const BertConfig& c);
  torch::Tensor forward(const torch::Tensor& hidden);  // [B, T, C] -> [B, C]
  zt::LoraLinear dense{nullptr};
};
TORCH_MODULE(BertPooler);

// bert.*: embeddings, encoder, pooler.
struct BertModelImpl : torch::nn::Module {
  explicit BertModelImpl(const BertConfig& c);
  // ids [B, T] int64, mask [B, T] (1 token, 0 padding) -> pooled [B, C].
  torch::Tensor forward(const torch::Tensor& ids, const torch::Tensor& attention_mask);
  BertEmbeddings embeddings{nullptr};
  BertEncoder encoder{nullptr};
  BertPooler pooler{nullptr};
};
TORCH_MODULE(BertModel);

struct BertForSequenceClassificationImpl : torch::nn::Module {
  explicit BertForSequenceClassificationImpl(const BertConfig& c);
  // ids [B, T] int64, mask [B, T] -> logits [B, num_labels].
  torch::Tensor forward(const torch::Tensor& ids, const torch::Tensor& attention_mask);
  BertConfig config;
  double classifier_dropout;
  BertModel bert{nullptr};
  zt::LoraLinear classifier{nullptr};
};

// Builds the model (the root is a unit too, so stage 3 shards the
// embeddings, pooler and head). The config must be valid; seeds nothing.
std::unique_ptr<Model> CreateBert(const ModelInfo& info, const BertConfig& c);

}  // namespace zt::models
