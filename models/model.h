// zt::models::Model: a built-in model that `zt train` can train without user
// code: its module (ready for zt::Engine::Create), what it computes and its
// size. Models are built by name through models/registry.h.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <string>

namespace zt::models {

enum class Task { kLanguageModel, kImageClassification };

// What a model is, without building it (registry.h's DescribeModel).
struct ModelInfo {
  std::string name;  // the preset, e.g. "gpt2-tiny"
  Task task = Task::kLanguageModel;
  int64_t vocab_size = 0;   // language models
  int64_t max_seq_len = 0;  // language models: longest input Forward accepts
  int64_t num_classes = 0;  // image classifiers
  int64_t image_size = 0;   // image classifiers: square inputs of this side
  int64_t num_params = 0;   // analytic count; a tied weight counts once
};

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
  virtual at::Tensor Forward(const at::Tensor& input) = 0;
  // Turns on activation checkpointing for the model's innermost units (the
  // transformer blocks): all of them when n <= 0, else the first n. Units
  // not chosen are turned off. Returns how many are on.
  virtual int CheckpointActivations(int n) = 0;
};

}  // namespace zt::models
