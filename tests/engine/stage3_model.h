// A GPT-style model for the stage-3 tests: token and position embeddings,
// transformer blocks of unequal widths (each a zt::Unit), a frozen adapter
// unit (requires_grad = false, LoRA-style), a final LayerNorm and an LM head
// whose weight is the token embedding's, registered under both names (tied,
// as in GPT-2). Tiny sizes that divide by no world size.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "tests/engine/parity_model.h"
#include "zero/unit.h"

namespace zt::testing {

struct TinyGptOptions {
  int64_t vocab = 29;
  int64_t seq = 6;
  int64_t dim = 12;
  std::vector<int64_t> hidden = {20, 36, 8};  // one block per entry
  bool frozen_adapter = true;
};

// GPT-2 names: attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj, ln_1, ln_2.
struct BlockImpl : torch::nn::Module {
  BlockImpl(int64_t dim, int64_t hidden);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  torch::nn::Linear c_attn{nullptr}, attn_proj{nullptr}, c_fc{nullptr}, mlp_proj{nullptr};
};

struct AdapterImpl : torch::nn::Module {
  explicit AdapterImpl(int64_t dim);  // frozen: requires_grad = false
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear proj{nullptr};
};

struct TiedHeadImpl : torch::nn::Module {
  explicit TiedHeadImpl(const torch::Tensor& weight) { this->weight = register_parameter("weight", weight); }
  torch::Tensor forward(const torch::Tensor& x) { return torch::linear(x, weight); }
  torch::Tensor weight;
};
TORCH_MODULE(TiedHead);

struct TinyGptImpl : torch::nn::Module {
  explicit TinyGptImpl(const TinyGptOptions& o);
  // idx: [batch, seq] int64 -> logits [batch, seq, vocab] (float32; float64 for a float64 model)
  torch::Tensor forward(const torch::Tensor& idx);

  TinyGptOptions options;
  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  std::vector<zt::Unit<BlockImpl>> h;
  zt::Unit<AdapterImpl> adapter{nullptr};
  torch::nn::LayerNorm ln_f{nullptr};
  TiedHead lm_head{nullptr};
  std::vector<int> order;  // which blocks run, in which order (default: all, in order)
};
TORCH_MODULE(TinyGpt);

// The model either as a plain module or with the top module as a unit too;
// `forward` goes through the right type (a unit's forward is not virtual).
struct TinyGptHandle {
  std::shared_ptr<TinyGptImpl> impl;
  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor(const torch::Tensor&)> forward;
};
TinyGptHandle MakeTinyGpt(const TinyGptOptions& o, bool root_is_unit);

// Random token sequences: x [rows, seq] and y, the same sequences shifted by one.
ParityData MakeTokenData(int64_t rows, const TinyGptOptions& o, uint64_t seed);

}  // namespace zt::testing
