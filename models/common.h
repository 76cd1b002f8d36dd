// Pieces the built-in models share: input checks that throw zt::Error, the
// causal attention core, and choosing which units to checkpoint.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/model.h"
#include "zero/unit.h"

namespace zt::models {

// Throws zt::Error (InvalidArgument) unless `tokens` is [B, T] of an integer
// dtype with 1 <= T <= info.max_seq_len and, for CPU tensors, ids in
// [0, vocab_size). Returns the tokens as int64.
at::Tensor CheckTokens(const at::Tensor& tokens, const ModelInfo& info);

// Which keys each query of a causal model attends to, and each token's
// position. Plain rows: causal over the row, positions 0..T-1 (shapes
// [1, 1, T, T] and [1, T], broadcast over the batch). Packed rows
// (`documents` [B, T] int64: 0 padding, k > 0 the document a token belongs
// to, each document contiguous): a token attends to the earlier tokens of
// its own document only, and positions restart at 0 with each document, as
// transformers computes packed sequences from their position_ids, so every
// document computes what it computes alone. Padding attends to itself only
// (a defined softmax; it takes no loss).
struct CausalLayout {
  at::Tensor allowed;    // bool [1 or B, 1, T, T]
  at::Tensor positions;  // int64 [1 or B, T]
};
CausalLayout MakeCausalLayout(int64_t t, const at::Tensor& documents, const at::Device& device);

// The layout of t new tokens after `past` cached ones: query i (position
// past + i) attends to keys 0..past+i. Shapes [1, 1, t, past + t] and [1, t].
CausalLayout MakeCachedCausalLayout(int64_t past, int64_t t, const at::Device& device);

// Throws zt::Error (InvalidArgument) when `past` cached positions and `t`
// new ones pass info.max_seq_len.
void CheckCachedLength(int64_t past, int64_t t, const ModelInfo& info);

// Throws zt::Error (InvalidArgument) unless `documents` is [B, T] like
// `tokens`, integer, and (CPU tensors) >= 0. Returns it as int64.
at::Tensor CheckDocuments(const at::Tensor& documents, const at::Tensor& tokens, const ModelInfo& info);

// softmax(q k^T / sqrt(head_dim), keys not `allowed` masked out) v, the
// softmax in float32 and its result cast back to q's dtype. q, k, v:
// [B, heads, T, head_dim]; allowed: CausalLayout's. `dropout` applies to the
// attention probabilities when `training`.
at::Tensor CausalAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& allowed,
                           double dropout, bool training);

// Turns checkpointing on for the first n units (all when n <= 0), off for the
// rest; returns how many are on.
int CheckpointFirst(const std::vector<UnitBase*>& units, int n);

// A causal language model whose top module is a unit of Impl: token checks
// on input, and checkpointing of the blocks `blocks` lists (GPT-2's h.{i},
// LLaMA's layers.{i}).
template <typename Impl>
class CausalLmModel : public Model {
 public:
  using Blocks = std::function<std::vector<UnitBase*>(Impl&)>;
  CausalLmModel(ModelInfo info, std::shared_ptr<UnitImpl<Impl>> module, Blocks blocks)
      : info_(std::move(info)), module_(std::move(module)), blocks_(std::move(blocks)) {}
  const ModelInfo& info() const override { return info_; }
  std::shared_ptr<torch::nn::Module> module() override { return module_; }
  at::Tensor Forward(const at::Tensor& input) override { return module_->forward(CheckTokens(input, info_)); }
  // The mask of a causal model holds document ids (MakeCausalLayout): packed
  // samples, each document attended to and positioned on its own.
  at::Tensor ForwardMasked(const at::Tensor& input, const at::Tensor& documents) override {
    if (!documents.defined()) return Forward(input);
    at::Tensor ids = CheckTokens(input, info_);
    return module_->forward(ids, CheckDocuments(documents, ids, info_));
  }
  at::Tensor ForwardCached(const at::Tensor& input, KvCache& cache) override {
    at::Tensor ids = CheckTokens(input, info_);
    CheckCachedLength(cache.length(), ids.size(1), info_);
    return module_->forward_cached(ids, cache);
  }
  int CheckpointActivations(int n) override { return CheckpointFirst(blocks_(*module_), n); }

 private:
  ModelInfo info_;
  std::shared_ptr<UnitImpl<Impl>> module_;
  Blocks blocks_;
};

}  // namespace zt::models
