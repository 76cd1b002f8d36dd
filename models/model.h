// zt::models::Model: a built-in model that `zt train` can train without user
// code: its module (ready for zt::Engine::Create), what it computes and its
// size. Models are built by name through models/registry.h.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/catalog/model_info.h"
#include "models/kv_cache.h"

namespace zt::models {

// A built model. Parameters are float32 on the CPU when created; the engine
// moves and casts them. Not thread-safe (one forward at a time).
class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelInfo& info() const = 0;
  // The root module, with the model's parameter names (Hugging Face's for the
  // transformers). Transformer blocks are zt::Unit sharding units.
  virtual std::shared_ptr<torch::nn::Module> module() = 0;
  // Language models: input [B, T] int64 token ids (T <= max_seq_len, ids <
  // vocab_size) -> logits [B, T, vocab_size] in the parameters' dtype.
  // Image classifiers: input [B, 1, 28, 28] float -> log-probabilities
  // [B, num_classes]. Throws zt::Error (InvalidArgument) for inputs of the
  // wrong rank, dtype or size, and for token ids out of range (CPU inputs).
  // Sequence classifiers: input [B, T] int64 token ids -> logits
  // [B, num_classes] in the parameters' dtype, every position attended to.
  virtual at::Tensor Forward(const at::Tensor& input) = 0;
  // Forward with a mask [B, T] int64. Sequence classifiers: an attention
  // mask (1: a token, 0: padding whose keys no position attends to), what a
  // tokenizer's padding gives with Hugging Face's attention_mask. Causal
  // language models: document ids of packed samples (0: padding; each
  // document attends and is positioned on its own, models/common.h's
  // MakeCausalLayout). An undefined mask is Forward(input). The default,
  // for models that take none (the CNN), throws zt::Error (InvalidArgument)
  // for a defined mask. (A separate name, so a model overriding one does not hide
  // the other.)
  virtual at::Tensor ForwardMasked(const at::Tensor& input, const at::Tensor& attention_mask);
  // Causal language models, incrementally (generation): the logits
  // [B, t, vocab_size] of `input` [B, t] taken as the positions after those
  // `cache` holds, which then holds these too (models/kv_cache.h). Equal to
  // Forward over the whole sequence at those positions, up to rounding
  // (models_kv_cache_test). Throws zt::Error (InvalidArgument) for bad ids
  // or a sequence that would pass max_seq_len; (Unimplemented) for models
  // that do not generate (classifiers: the default).
  virtual at::Tensor ForwardCached(const at::Tensor& input, KvCache& cache);
  // Parameters of a task head that a base model's weights do not have (BERT's
  // classifier.* when starting from BertModel / BertForMaskedLM weights):
  // loading such weights keeps their initial values. Empty by default.
  virtual std::vector<std::string> NewHeadParameters() const { return {}; }
  // Turns on activation checkpointing for the model's innermost units (the
  // transformer blocks): all of them when n <= 0, else the first n. Units
  // not chosen are turned off. Returns how many are on.
  virtual int CheckpointActivations(int n) = 0;
};

}  // namespace zt::models
