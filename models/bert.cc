// Implementation of models/bert.h, following transformers' modeling_bert.py
// (BertEmbeddings, BertSelfAttention's eager path, BertSelfOutput,
// BertIntermediate, BertOutput, BertPooler, BertForSequenceClassification,
// BertPreTrainedModel._init_weights, get_extended_attention_mask).
#include "models/bert.h"

#include <ATen/Dispatch.h>

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "models/common.h"
#include "util/error.h"

namespace zt::models {

namespace {

// HF's _init_weights for nn.Linear: weight normal(0, initializer_range), bias 0.
zt::LoraLinear Dense(int64_t in, int64_t out, double init_std) {
  zt::LoraLinear linear(torch::nn::LinearOptions(in, out).bias(true));
  torch::nn::init::normal_(linear->weight, 0.0, init_std);
  torch::nn::init::zeros_(linear->bias);
  return linear;
}

torch::nn::LayerNorm Norm(const BertConfig& c) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.n_embd}).eps(c.layer_norm_eps));
}

// torch.finfo(t).min.
double LowestOf(c10::ScalarType t) {
  double v = 0;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, t, "LowestOf",
                                  [&] { v = static_cast<double>(std::numeric_limits<scalar_t>::lowest()); });
  return v;
}

torch::Tensor Dropout(const torch::Tensor& x, double p, bool training) {
  return p > 0 && training ? torch::dropout(x, p, /*train=*/true) : x;
}

}  // namespace

BertEmbeddingsImpl::BertEmbeddingsImpl(const BertConfig& c) : dropout(c.dropout_percent / 100.0) {
  // padding_idx as HF's nn.Embedding(..., padding_idx=pad_token_id): the row
  // starts at zero and its gradient is zero.
  word_embeddings = register_module(
      "word_embeddings",
      torch::nn::Embedding(torch::nn::EmbeddingOptions(c.vocab_size, c.n_embd).padding_idx(c.pad_token_id)));
  position_embeddings = register_module("position_embeddings", torch::nn::Embedding(c.max_positions, c.n_embd));
  token_type_embeddings = register_module("token_type_embeddings", torch::nn::Embedding(c.type_vocab_size, c.n_embd));
  LayerNorm = register_module("LayerNorm", Norm(c));
  torch::NoGradGuard no_grad;
  for (torch::nn::Embedding* e : {&word_embeddings, &position_embeddings, &token_type_embeddings}) {
    torch::nn::init::normal_((*e)->weight, 0.0, c.initializer_range);
  }
  word_embeddings->weight[c.pad_token_id].zero_();
}

torch::Tensor BertEmbeddingsImpl::forward(const torch::Tensor& ids) {
  torch::Tensor pos = torch::arange(ids.size(1), torch::TensorOptions().dtype(torch::kLong).device(ids.device()));
  // Single-sentence input: every position is token type 0 (HF's default
  // token_type_ids of zeros), so row 0 is added everywhere.
  torch::Tensor x = word_embeddings(ids) + position_embeddings(pos) + token_type_embeddings->weight[0];
  return Dropout(LayerNorm(x), dropout, is_training());
}

BertSelfAttentionImpl::BertSelfAttentionImpl(const BertConfig& c)
    : n_head(c.n_head), dropout(c.dropout_percent / 100.0) {
  query = register_module("query", Dense(c.n_embd, c.n_embd, c.initializer_range));
  key = register_module("key", Dense(c.n_embd, c.n_embd, c.initializer_range));
  value = register_module("value", Dense(c.n_embd, c.n_embd, c.initializer_range));
}

torch::Tensor BertSelfAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& additive_mask) {
  const int64_t b = x.size(0), t = x.size(1), d = x.size(2), hd = d / n_head;
  auto heads = [&](const torch::Tensor& y) { return y.view({b, t, n_head, hd}).transpose(1, 2); };
  torch::Tensor q = heads(query(x)), k = heads(key(x)), v = heads(value(x));
  torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(hd)) + additive_mask;
  // Softmax in float32, cast back: what HF computes in float32, and steadier
  // than its 16-bit softmax in bf16/fp16.
  torch::Tensor probs = torch::softmax(scores, -1, torch::kFloat).to(q.scalar_type());
  probs = Dropout(probs, dropout, is_training());
  return torch::matmul(probs, v).transpose(1, 2).contiguous().view({b, t, d});
}

BertResidualOutputImpl::BertResidualOutputImpl(const BertConfig& c, int64_t in) : dropout(c.dropout_percent / 100.0) {
  dense = register_module("dense", Dense(in, c.n_embd, c.initializer_range));
  LayerNorm = register_module("LayerNorm", Norm(c));
}

torch::Tensor BertResidualOutputImpl::forward(const torch::Tensor& x, const torch::Tensor& residual) {
  return LayerNorm(Dropout(dense(x), dropout, is_training()) + residual);
}

BertAttentionImpl::BertAttentionImpl(const BertConfig& c) {
  self_attention = register_module("self", BertSelfAttention(c));
  output = register_module("output", BertResidualOutput(c, c.n_embd));
}

torch::Tensor BertAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& additive_mask) {
  return output(self_attention(x, additive_mask), x);
}

BertIntermediateImpl::BertIntermediateImpl(const BertConfig& c) {
  dense = register_module("dense", Dense(c.n_embd, c.intermediate, c.initializer_range));
}

torch::Tensor BertIntermediateImpl::forward(const torch::Tensor& x) { return torch::gelu(dense(x)); }

BertLayerImpl::BertLayerImpl(const BertConfig& c) {
  attention = register_module("attention", BertAttention(c));
  intermediate = register_module("intermediate", BertIntermediate(c));
  output = register_module("output", BertResidualOutput(c, c.intermediate));
}

torch::Tensor BertLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& additive_mask) {
  torch::Tensor h = attention(x, additive_mask);
  return output(intermediate(h), h);
}

BertEncoderImpl::BertEncoderImpl(const BertConfig& c) {
  layer_list = register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_layer; ++i) {
    layer.emplace_back(c);
    layer_list->push_back(layer.back());
  }
}

torch::Tensor BertEncoderImpl::forward(const torch::Tensor& x, const torch::Tensor& additive_mask) {
  torch::Tensor h = x;
  for (auto& l : layer) h = l(h, additive_mask);
  return h;
}

BertPoolerImpl::BertPoolerImpl(const BertConfig& c) {
  dense = register_module("dense", Dense(c.n_embd, c.n_embd, c.initializer_range));
}

torch::Tensor BertPoolerImpl::forward(const torch::Tensor& hidden) { return torch::tanh(dense(hidden.select(1, 0))); }

BertModelImpl::BertModelImpl(const BertConfig& c) {
  embeddings = register_module("embeddings", BertEmbeddings(c));
  encoder = register_module("encoder", BertEncoder(c));
  pooler = register_module("pooler", BertPooler(c));
}

torch::Tensor BertModelImpl::forward(const torch::Tensor& ids, const torch::Tensor& attention_mask) {
  torch::Tensor x = embeddings(ids);
  // get_extended_attention_mask: [B, 1, 1, T], 0 on attended keys and
  // finfo(dtype).min on padding keys, in the hidden states' dtype.
  torch::Tensor additive =
      (1 - attention_mask.to(x.scalar_type())).view({ids.size(0), 1, 1, ids.size(1)}) * LowestOf(x.scalar_type());
  return pooler(encoder(x, additive));
}

BertForSequenceClassificationImpl::BertForSequenceClassificationImpl(const BertConfig& c)
    : config(c), classifier_dropout(c.classifier_dropout >= 0 ? c.classifier_dropout : c.dropout_percent / 100.0) {
  bert = register_module("bert", BertModel(c));
  classifier = register_module("classifier", Dense(c.n_embd, c.num_labels, c.initializer_range));
}

torch::Tensor BertForSequenceClassificationImpl::forward(const torch::Tensor& ids,
                                                         const torch::Tensor& attention_mask) {
  return classifier(Dropout(bert(ids, attention_mask), classifier_dropout, is_training()));
}

namespace {

class BertClassifierModel : public Model {
 public:
  BertClassifierModel(ModelInfo info, const BertConfig& c)
      : info_(std::move(info)), module_(std::make_shared<zt::UnitImpl<BertForSequenceClassificationImpl>>(c)) {}
  const ModelInfo& info() const override { return info_; }
  std::shared_ptr<torch::nn::Module> module() override { return module_; }
  at::Tensor Forward(const at::Tensor& input) override {
    const at::Tensor ids = CheckTokens(input, info_);
    return module_->forward(ids, torch::ones_like(ids));
  }
  at::Tensor ForwardMasked(const at::Tensor& input, const at::Tensor& attention_mask) override {
    if (!attention_mask.defined()) return Forward(input);
    const at::Tensor ids = CheckTokens(input, info_);
    return module_->forward(ids, CheckMask(attention_mask, ids));
  }
  // BertModel / BertForMaskedLM weights have no classifier: it starts fresh.
  std::vector<std::string> NewHeadParameters() const override { return {"classifier.weight", "classifier.bias"}; }
  int CheckpointActivations(int n) override {
    std::vector<UnitBase*> units;
    for (auto& layer : module_->bert->encoder->layer) units.push_back(layer.get());
    return CheckpointFirst(units, n);
  }

 private:
  // The mask as int64 [B, T] of zeros and ones, or zt::Error.
  at::Tensor CheckMask(const at::Tensor& mask, const at::Tensor& ids) const {
    auto bad = [this](const std::string& what) {
      return Error(absl::InvalidArgumentError(absl::StrCat("model ", info_.name, ": attention mask ", what)));
    };
    if (mask.sizes() != ids.sizes()) {
      throw bad(absl::StrCat("has shape ", c10::str(mask.sizes()), ", the token ids ", c10::str(ids.sizes()),
                             "; give one 0/1 entry per token"));
    }
    if (!at::isIntegralType(mask.scalar_type(), /*includeBool=*/true)) {
      throw bad(absl::StrCat("must be integers (1: token, 0: padding), got ",
                             std::string(c10::toString(mask.scalar_type()))));
    }
    if (mask.device() != ids.device()) {
      throw bad(absl::StrCat("is on ", mask.device().str(), ", the token ids on ", ids.device().str()));
    }
    at::Tensor m = mask.to(torch::kLong);
    // Values are checked on the CPU only (on a GPU the check would cost a
    // host sync per step). The first position is the [CLS] token the pooler
    // reads: a row that masks it has no meaningful classification.
    if (m.device().is_cpu()) {
      if (m.lt(0).logical_or(m.gt(1)).any().item<bool>()) throw bad("holds values other than 0 and 1");
      const at::Tensor first = m.select(1, 0);
      if (first.eq(0).any().item<bool>()) {
        const int64_t row = first.eq(0).nonzero()[0][0].item<int64_t>();
        throw bad(absl::StrCat("masks the first position of row ", row,
                               " (its [CLS] token, which the classifier reads); pad on the right and keep "
                               "every sequence's first token unmasked"));
      }
    }
    return m;
  }

  ModelInfo info_;
  std::shared_ptr<zt::UnitImpl<BertForSequenceClassificationImpl>> module_;
};

}  // namespace

std::unique_ptr<Model> CreateBert(const ModelInfo& info, const BertConfig& c) {
  return std::make_unique<BertClassifierModel>(info, c);
}

}  // namespace zt::models
