// Implementation of models/gpt2.h, following transformers' modeling_gpt2.py
// (GPT2Attention._attn, GPT2MLP with gelu_new, GPT2PreTrainedModel._init_weights).
#include "models/gpt2.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "lora/dense_linear.h"
#include "models/common.h"
#include "util/error.h"

namespace zt::models {

Conv1DImpl::Conv1DImpl(int64_t nx, int64_t nf, double init_std) {
  weight = register_parameter("weight", torch::empty({nx, nf}).normal_(0.0, init_std));
  bias = register_parameter("bias", torch::zeros({nf}));
}

torch::Tensor Conv1DImpl::forward(const torch::Tensor& x) {
  return AddLoraTerm(x, DenseLinear(x, weight, bias, /*in_out=*/true), is_training());
}

Gpt2AttentionImpl::Gpt2AttentionImpl(const Gpt2Config& c) : n_head(c.n_head), dropout(c.dropout_percent / 100.0) {
  c_attn = register_module("c_attn", Conv1D(c.n_embd, 3 * c.n_embd, c.initializer_range));
  // HF scales the init of residual projections by 1/sqrt(2 n_layer) (GPT-2 paper).
  c_proj = register_module("c_proj", Conv1D(c.n_embd, c.n_embd, c.initializer_range / std::sqrt(2.0 * c.n_layer)));
}

torch::Tensor Gpt2AttentionImpl::forward(const torch::Tensor& x, const CausalLayout& layout) {
  const int64_t b = x.size(0), t = x.size(1), d = x.size(2), hd = d / n_head;
  std::vector<torch::Tensor> qkv = c_attn(x).split(d, -1);
  auto heads = [&](const torch::Tensor& y) { return y.view({b, t, n_head, hd}).transpose(1, 2); };
  torch::Tensor y =
      CausalAttention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), layout.allowed, dropout, is_training());
  y = c_proj(y.transpose(1, 2).contiguous().view({b, t, d}));
  return dropout > 0 ? torch::dropout(y, dropout, is_training()) : y;
}

torch::Tensor Gpt2AttentionImpl::forward_cached(const torch::Tensor& x, KvCache& cache, size_t layer,
                                                const CausalLayout& layout) {
  const int64_t b = x.size(0), t = x.size(1), d = x.size(2), hd = d / n_head;
  std::vector<torch::Tensor> qkv = c_attn(x).split(d, -1);
  auto heads = [&](const torch::Tensor& y) { return y.view({b, t, n_head, hd}).transpose(1, 2); };
  auto [k, v] = cache.Append(layer, heads(qkv[1]), heads(qkv[2]));
  torch::Tensor y = CausalAttention(heads(qkv[0]), k, v, layout.allowed, 0.0, /*training=*/false);
  return c_proj(y.transpose(1, 2).contiguous().view({b, t, d}));
}

Gpt2MlpImpl::Gpt2MlpImpl(const Gpt2Config& c) : dropout(c.dropout_percent / 100.0) {
  c_fc = register_module("c_fc", Conv1D(c.n_embd, 4 * c.n_embd, c.initializer_range));
  c_proj = register_module("c_proj", Conv1D(4 * c.n_embd, c.n_embd, c.initializer_range / std::sqrt(2.0 * c.n_layer)));
}

torch::Tensor Gpt2MlpImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = c_proj(torch::gelu(c_fc(x), "tanh"));  // gelu_new
  return dropout > 0 ? torch::dropout(y, dropout, is_training()) : y;
}

Gpt2BlockImpl::Gpt2BlockImpl(const Gpt2Config& c) {
  auto ln = [&c] { return torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.n_embd}).eps(c.layer_norm_epsilon)); };
  ln_1 = register_module("ln_1", ln());
  attn = register_module("attn", Gpt2Attention(c));
  ln_2 = register_module("ln_2", ln());
  mlp = register_module("mlp", Gpt2Mlp(c));
}

torch::Tensor Gpt2BlockImpl::forward(const torch::Tensor& x, const CausalLayout& layout) {
  torch::Tensor h = x + attn(ln_1(x), layout);
  return h + mlp(ln_2(h));
}

torch::Tensor Gpt2BlockImpl::forward_cached(const torch::Tensor& x, KvCache& cache, size_t layer,
                                            const CausalLayout& layout) {
  torch::Tensor h = x + attn->forward_cached(ln_1(x), cache, layer, layout);
  return h + mlp(ln_2(h));
}

Gpt2TransformerImpl::Gpt2TransformerImpl(const Gpt2Config& c) : dropout(c.dropout_percent / 100.0) {
  wte = register_module("wte", torch::nn::Embedding(c.vocab_size, c.n_embd));
  wpe = register_module("wpe", torch::nn::Embedding(c.n_positions, c.n_embd));
  torch::nn::init::normal_(wte->weight, 0.0, c.initializer_range);
  torch::nn::init::normal_(wpe->weight, 0.0, c.initializer_range);
  h = register_module("h", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_layer; ++i) {
    blocks.emplace_back(c);
    h->push_back(blocks.back());
  }
  ln_f =
      register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.n_embd}).eps(c.layer_norm_epsilon)));
}

torch::Tensor Gpt2TransformerImpl::forward(const torch::Tensor& idx, const torch::Tensor& documents) {
  const CausalLayout layout = MakeCausalLayout(idx.size(1), documents, idx.device());
  torch::Tensor x = wte(idx) + wpe(layout.positions);
  if (dropout > 0) x = torch::dropout(x, dropout, is_training());
  for (auto& block : blocks) x = block(x, layout);
  return ln_f(x);
}

torch::Tensor Gpt2TransformerImpl::forward_cached(const torch::Tensor& idx, KvCache& cache) {
  const CausalLayout layout = MakeCachedCausalLayout(cache.length(), idx.size(1), idx.device());
  torch::Tensor x = wte(idx) + wpe(layout.positions);
  for (size_t i = 0; i < blocks.size(); ++i) x = blocks[i]->forward_cached(x, cache, i, layout);
  cache.Advance(idx.size(1));
  return ln_f(x);
}

Gpt2LMHeadModelImpl::Gpt2LMHeadModelImpl(const Gpt2Config& c) : config(c) {
  transformer = register_module("transformer", Gpt2Transformer(c));
  lm_head = register_module("lm_head", TiedLmHead(transformer->wte->weight));
}

torch::Tensor Gpt2LMHeadModelImpl::forward(const torch::Tensor& idx) { return lm_head(transformer(idx)); }
torch::Tensor Gpt2LMHeadModelImpl::forward(const torch::Tensor& idx, const torch::Tensor& documents) {
  return lm_head(transformer(idx, documents));
}

torch::Tensor Gpt2LMHeadModelImpl::forward_cached(const torch::Tensor& idx, KvCache& cache) {
  return lm_head(transformer->forward_cached(idx, cache));
}

std::unique_ptr<Model> CreateGpt2(const ModelInfo& info, const Gpt2Config& c) {
  auto blocks = [](Gpt2LMHeadModelImpl& m) {
    std::vector<UnitBase*> units;
    for (auto& block : m.transformer->blocks) units.push_back(block.get());
    return units;
  };
  return std::make_unique<CausalLmModel<Gpt2LMHeadModelImpl>>(
      info, std::make_shared<zt::UnitImpl<Gpt2LMHeadModelImpl>>(c), blocks);
}

}  // namespace zt::models
