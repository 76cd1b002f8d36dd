// Implementation of models/llama.h, following transformers' modeling_llama.py
// (LlamaRMSNorm, LlamaRotaryEmbedding, apply_rotary_pos_emb, repeat_kv,
// LlamaAttention, LlamaMLP, LlamaPreTrainedModel._init_weights).
#include "models/llama.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "models/common.h"
#include "util/error.h"

namespace zt::models {

torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  torch::Tensor h = x.to(torch::kFloat);
  h = h * torch::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return weight * h.to(x.scalar_type());
}

std::pair<torch::Tensor, torch::Tensor> RotaryCosSin(int64_t t, int64_t head_dim, double theta,
                                                     const torch::Device& device, const RopeScaling& scaling) {
  auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(device);
  torch::Tensor inv_freq =
      1.0 /
      torch::pow(
          theta,
          torch::arange(0, head_dim, 2, torch::TensorOptions().dtype(torch::kLong).device(device)).to(torch::kFloat) /
              static_cast<double>(head_dim));
  if (scaling.type == RopeScaling::Type::kLinear) {
    inv_freq = inv_freq / scaling.factor;
  } else if (scaling.type == RopeScaling::Type::kLlama3) {
    // _compute_llama3_parameters, step for step.
    const double old_len = static_cast<double>(scaling.original_max_positions);
    const double low_wavelen = old_len / scaling.low_freq_factor;
    const double high_wavelen = old_len / scaling.high_freq_factor;
    const torch::Tensor wavelen = 2 * M_PI / inv_freq;
    torch::Tensor llama = torch::where(wavelen > low_wavelen, inv_freq / scaling.factor, inv_freq);
    const torch::Tensor smooth =
        (old_len / wavelen - scaling.low_freq_factor) / (scaling.high_freq_factor - scaling.low_freq_factor);
    const torch::Tensor smoothed = (1 - smooth) * llama / scaling.factor + smooth * llama;
    const torch::Tensor medium = wavelen.ge(high_wavelen).logical_and(wavelen.le(low_wavelen));
    inv_freq = torch::where(medium, smoothed, llama);
  }
  torch::Tensor freqs = torch::outer(torch::arange(t, f32), inv_freq);
  torch::Tensor emb = torch::cat({freqs, freqs}, -1);
  return {emb.cos(), emb.sin()};
}

torch::Tensor ApplyRotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  torch::Tensor rotated = torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos.to(x.scalar_type()) + rotated * sin.to(x.scalar_type());
}

LlamaRmsNormImpl::LlamaRmsNormImpl(int64_t dim, double eps) : eps(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

namespace {

// zt::LoraLinear: torch::nn::Linear that can take a LoRA adapter.
zt::LoraLinear NoBiasLinear(int64_t in, int64_t out, double init_std) {
  zt::LoraLinear linear(torch::nn::LinearOptions(in, out).bias(false));
  torch::nn::init::normal_(linear->weight, 0.0, init_std);
  return linear;
}

}  // namespace

LlamaAttentionImpl::LlamaAttentionImpl(const LlamaConfig& c)
    : n_head(c.n_head),
      n_kv_head(c.n_kv_head),
      head_dim(c.n_embd / c.n_head),
      rope_theta(c.rope_theta),
      rope_scaling(c.rope_scaling) {
  const double init_std = c.initializer_range;
  // Qwen2's q/k/v biases start at zero, as transformers initializes them.
  auto qkv = [&](int64_t out) {
    if (!c.qkv_bias) return NoBiasLinear(c.n_embd, out, init_std);
    zt::LoraLinear linear(torch::nn::LinearOptions(c.n_embd, out).bias(true));
    torch::nn::init::normal_(linear->weight, 0.0, init_std);
    torch::nn::init::zeros_(linear->bias);
    return linear;
  };
  q_proj = register_module("q_proj", qkv(n_head * head_dim));
  k_proj = register_module("k_proj", qkv(n_kv_head * head_dim));
  v_proj = register_module("v_proj", qkv(n_kv_head * head_dim));
  o_proj = register_module("o_proj", NoBiasLinear(n_head * head_dim, c.n_embd, init_std));
}

std::pair<torch::Tensor, torch::Tensor> LlamaAttentionImpl::RotaryRows(const torch::Tensor& positions, int64_t t,
                                                                       const torch::Device& device) const {
  // The tables up to the last position; each token's row by its position.
  const int64_t rows_needed = positions.numel() == 0 ? 0 : positions.max().item<int64_t>() + 1;
  auto [table_cos, table_sin] = RotaryCosSin(std::max(rows_needed, t), head_dim, rope_theta, device, rope_scaling);
  const torch::Tensor rows = positions.reshape({-1});
  return {table_cos.index_select(0, rows).view({positions.size(0), 1, t, head_dim}),
          table_sin.index_select(0, rows).view({positions.size(0), 1, t, head_dim})};
}

namespace {

// repeat_kv: query head j reads kv head j / (n_head / n_kv_head). x: [B, n_kv_head, L, head_dim].
torch::Tensor RepeatKv(const torch::Tensor& x, int64_t n_head) {
  const int64_t b = x.size(0), n_kv_head = x.size(1), l = x.size(2), hd = x.size(3);
  if (n_kv_head == n_head) return x;
  return x.unsqueeze(2).expand({b, n_kv_head, n_head / n_kv_head, l, hd}).reshape({b, n_head, l, hd});
}

}  // namespace

torch::Tensor LlamaAttentionImpl::forward(const torch::Tensor& x, const CausalLayout& layout) {
  const int64_t b = x.size(0), t = x.size(1);
  torch::Tensor q = q_proj(x).view({b, t, n_head, head_dim}).transpose(1, 2);
  torch::Tensor k = k_proj(x).view({b, t, n_kv_head, head_dim}).transpose(1, 2);
  torch::Tensor v = v_proj(x).view({b, t, n_kv_head, head_dim}).transpose(1, 2);
  auto [table_cos, table_sin] = RotaryCosSin(t, head_dim, rope_theta, x.device(), rope_scaling);
  // Each token's row of the tables, by its position: [1 or B, 1, T, head_dim].
  const torch::Tensor rows = layout.positions.reshape({-1});
  const torch::Tensor cos = table_cos.index_select(0, rows).view({layout.positions.size(0), 1, t, head_dim});
  const torch::Tensor sin = table_sin.index_select(0, rows).view({layout.positions.size(0), 1, t, head_dim});
  q = ApplyRotary(q, cos, sin);
  k = ApplyRotary(k, cos, sin);
  torch::Tensor y =
      CausalAttention(q, RepeatKv(k, n_head), RepeatKv(v, n_head), layout.allowed, /*dropout=*/0.0, is_training());
  return o_proj(y.transpose(1, 2).contiguous().view({b, t, n_head * head_dim}));
}

torch::Tensor LlamaAttentionImpl::forward_cached(const torch::Tensor& x, KvCache& cache, size_t layer,
                                                 const CausalLayout& layout) {
  const int64_t b = x.size(0), t = x.size(1);
  torch::Tensor q = q_proj(x).view({b, t, n_head, head_dim}).transpose(1, 2);
  torch::Tensor k = k_proj(x).view({b, t, n_kv_head, head_dim}).transpose(1, 2);
  torch::Tensor v = v_proj(x).view({b, t, n_kv_head, head_dim}).transpose(1, 2);
  auto [cos, sin] = RotaryRows(layout.positions, t, x.device());
  q = ApplyRotary(q, cos, sin);
  auto [keys, values] = cache.Append(layer, ApplyRotary(k, cos, sin), v);
  torch::Tensor y =
      CausalAttention(q, RepeatKv(keys, n_head), RepeatKv(values, n_head), layout.allowed, 0.0, /*training=*/false);
  return o_proj(y.transpose(1, 2).contiguous().view({b, t, n_head * head_dim}));
}

LlamaMlpImpl::LlamaMlpImpl(const LlamaConfig& c) {
  gate_proj = register_module("gate_proj", NoBiasLinear(c.n_embd, c.intermediate, c.initializer_range));
  up_proj = register_module("up_proj", NoBiasLinear(c.n_embd, c.intermediate, c.initializer_range));
  down_proj = register_module("down_proj", NoBiasLinear(c.intermediate, c.n_embd, c.initializer_range));
}

torch::Tensor LlamaMlpImpl::forward(const torch::Tensor& x) {
  return down_proj(torch::silu(gate_proj(x)) * up_proj(x));
}

LlamaDecoderLayerImpl::LlamaDecoderLayerImpl(const LlamaConfig& c) {
  self_attn = register_module("self_attn", LlamaAttention(c));
  mlp = register_module("mlp", LlamaMlp(c));
  input_layernorm = register_module("input_layernorm", LlamaRmsNorm(c.n_embd, c.rms_norm_eps));
  post_attention_layernorm = register_module("post_attention_layernorm", LlamaRmsNorm(c.n_embd, c.rms_norm_eps));
}

torch::Tensor LlamaDecoderLayerImpl::forward(const torch::Tensor& x, const CausalLayout& layout) {
  torch::Tensor h = x + self_attn(input_layernorm(x), layout);
  return h + mlp(post_attention_layernorm(h));
}

torch::Tensor LlamaDecoderLayerImpl::forward_cached(const torch::Tensor& x, KvCache& cache, size_t layer,
                                                    const CausalLayout& layout) {
  torch::Tensor h = x + self_attn->forward_cached(input_layernorm(x), cache, layer, layout);
  return h + mlp(post_attention_layernorm(h));
}

LlamaModelImpl::LlamaModelImpl(const LlamaConfig& c) {
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(c.vocab_size, c.n_embd));
  torch::nn::init::normal_(embed_tokens->weight, 0.0, c.initializer_range);
  layers_list = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_layer; ++i) {
    layers.emplace_back(c);
    layers_list->push_back(layers.back());
  }
  norm = register_module("norm", LlamaRmsNorm(c.n_embd, c.rms_norm_eps));
}

torch::Tensor LlamaModelImpl::forward(const torch::Tensor& idx, const torch::Tensor& documents) {
  const CausalLayout layout = MakeCausalLayout(idx.size(1), documents, idx.device());
  torch::Tensor x = embed_tokens(idx);
  for (auto& layer : layers) x = layer(x, layout);
  return norm(x);
}

torch::Tensor LlamaModelImpl::forward_cached(const torch::Tensor& idx, KvCache& cache) {
  const CausalLayout layout = MakeCachedCausalLayout(cache.length(), idx.size(1), idx.device());
  torch::Tensor x = embed_tokens(idx);
  for (size_t i = 0; i < layers.size(); ++i) x = layers[i]->forward_cached(x, cache, i, layout);
  cache.Advance(idx.size(1));
  return norm(x);
}

LlamaForCausalLMImpl::LlamaForCausalLMImpl(const LlamaConfig& c) : config(c) {
  model = register_module("model", LlamaModel(c));
  if (c.tie_word_embeddings) {
    tied_lm_head = register_module("lm_head", TiedLmHead(model->embed_tokens->weight));
  } else {
    lm_head = register_module("lm_head", NoBiasLinear(c.n_embd, c.vocab_size, c.initializer_range));
  }
}

torch::Tensor LlamaForCausalLMImpl::forward(const torch::Tensor& idx) { return forward(idx, torch::Tensor()); }
torch::Tensor LlamaForCausalLMImpl::forward(const torch::Tensor& idx, const torch::Tensor& documents) {
  const torch::Tensor h = model(idx, documents);
  return config.tie_word_embeddings ? tied_lm_head(h) : lm_head(h);
}

torch::Tensor LlamaForCausalLMImpl::forward_cached(const torch::Tensor& idx, KvCache& cache) {
  const torch::Tensor h = model->forward_cached(idx, cache);
  return config.tie_word_embeddings ? tied_lm_head(h) : lm_head(h);
}

std::unique_ptr<Model> CreateLlama(const ModelInfo& info, const LlamaConfig& c) {
  auto blocks = [](LlamaForCausalLMImpl& m) {
    std::vector<UnitBase*> units;
    for (auto& block : m.model->layers) units.push_back(block.get());
    return units;
  };
  return std::make_unique<CausalLmModel<LlamaForCausalLMImpl>>(
      info, std::make_shared<zt::UnitImpl<LlamaForCausalLMImpl>>(c), blocks);
}

}  // namespace zt::models
