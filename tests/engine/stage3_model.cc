// Implementation of tests/engine/stage3_model.h.
#include "tests/engine/stage3_model.h"

#include <cmath>

namespace zt::testing {

BlockImpl::BlockImpl(int64_t dim, int64_t hidden) {
  ln_1 = register_module("ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
  // No bias: a key bias gets an exactly-zero gradient (softmax ignores a
  // shift shared by all keys), and Adam would turn rounding noise into steps.
  c_attn = register_module("c_attn", torch::nn::Linear(torch::nn::LinearOptions(dim, 3 * dim).bias(false)));
  attn_proj = register_module("attn_proj", torch::nn::Linear(dim, dim));
  ln_2 = register_module("ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
  c_fc = register_module("c_fc", torch::nn::Linear(dim, hidden));
  mlp_proj = register_module("mlp_proj", torch::nn::Linear(hidden, dim));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x) {
  // One-head causal self-attention, then the MLP, both residual.
  const int64_t t = x.size(1), d = x.size(2);
  std::vector<torch::Tensor> qkv = c_attn(ln_1(x)).split(d, -1);
  torch::Tensor att = torch::matmul(qkv[0], qkv[1].transpose(1, 2)) / std::sqrt(static_cast<double>(d));
  torch::Tensor mask = torch::ones({t, t}, torch::kBool).triu(1);
  att = torch::softmax(att.masked_fill(mask, -1e4), -1);
  torch::Tensor y = x + attn_proj(torch::matmul(att, qkv[2]));
  return y + mlp_proj(torch::gelu(c_fc(ln_2(y))));
}

AdapterImpl::AdapterImpl(int64_t dim) {
  proj = register_module("proj", torch::nn::Linear(dim, dim));
  for (auto& p : parameters()) p.set_requires_grad(false);
}

torch::Tensor AdapterImpl::forward(const torch::Tensor& x) { return x + torch::tanh(proj(x)); }

TinyGptImpl::TinyGptImpl(const TinyGptOptions& o) : options(o) {
  wte = register_module("wte", torch::nn::Embedding(o.vocab, o.dim));
  wpe = register_module("wpe", torch::nn::Embedding(o.seq, o.dim));
  for (size_t i = 0; i < o.hidden.size(); ++i) {
    h.push_back(register_module("h" + std::to_string(i), zt::Unit<BlockImpl>(o.dim, o.hidden[i])));
    order.push_back(static_cast<int>(i));
  }
  if (o.frozen_adapter) adapter = register_module("adapter", zt::Unit<AdapterImpl>(o.dim));
  ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.dim})));
  lm_head = register_module("lm_head", TiedHead(wte->weight));
}

torch::Tensor TinyGptImpl::forward(const torch::Tensor& idx) {
  torch::Tensor pos = torch::arange(idx.size(1), torch::kLong);
  torch::Tensor x = wte(idx) + wpe(pos);
  for (int i : order) x = h[static_cast<size_t>(i)](x);
  if (adapter) x = adapter(x);
  torch::Tensor logits = lm_head(ln_f(x));
  // bf16 logits go to fp32 for the loss; fp32 and float64 (the truth run) stay.
  return logits.scalar_type() == torch::kBFloat16 ? logits.to(torch::kFloat) : logits;
}

TinyGptHandle MakeTinyGpt(const TinyGptOptions& o, bool root_is_unit) {
  TinyGptHandle m;
  if (root_is_unit) {
    auto unit = std::make_shared<zt::UnitImpl<TinyGptImpl>>(o);
    m.impl = unit;
    m.module = unit;
    m.forward = [unit](const torch::Tensor& x) { return unit->forward(x); };
  } else {
    auto plain = std::make_shared<TinyGptImpl>(o);
    m.impl = plain;
    m.module = plain;
    m.forward = [plain](const torch::Tensor& x) { return plain->forward(x); };
  }
  return m;
}

ParityData MakeTokenData(int64_t rows, const TinyGptOptions& o, uint64_t seed) {
  torch::manual_seed(seed);
  ParityData d;
  torch::Tensor tokens = torch::randint(o.vocab, {rows, o.seq + 1}, torch::kLong);
  d.x = tokens.narrow(1, 0, o.seq).contiguous();
  d.y = tokens.narrow(1, 1, o.seq).contiguous();
  return d;
}

}  // namespace zt::testing
