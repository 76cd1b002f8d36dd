// The keys and values a causal language model has computed for the
// positions it has seen, per layer, so that generation (zt generate)
// computes only each new token's forward instead of the whole sequence
// again: Model::ForwardCached.
//
//   zt::models::KvCache cache;
//   at::Tensor logits = model->ForwardCached(prompt, cache);   // [1, T, vocab]
//   logits = model->ForwardCached(next_token, cache);          // [1, 1, vocab]
//
// Contract: one sequence batch per cache (the batch size is fixed by the
// first call); every layer appends the same number of positions in one
// forward, then the model calls Advance. Buffers grow by doubling, so a
// cache costs at most twice the keys and values it holds. Not thread-safe.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace zt::models {

class KvCache {
 public:
  // Positions already cached (the next token's position).
  int64_t length() const { return length_; }
  // Stores layer `layer`'s keys and values `k`, `v` [B, heads, t, head_dim]
  // for positions length()..length()+t-1 and returns views of every cached
  // position of that layer, [B, heads, length()+t, head_dim].
  std::pair<at::Tensor, at::Tensor> Append(size_t layer, const at::Tensor& k, const at::Tensor& v);
  // After every layer appended t positions.
  void Advance(int64_t t) { length_ += t; }
  // Bytes of the buffers held.
  int64_t nbytes() const;

 private:
  struct Layer {
    at::Tensor k, v;  // [B, heads, capacity, head_dim]; [0, length) valid
  };
  std::vector<Layer> layers_;
  int64_t length_ = 0;
};

}  // namespace zt::models
