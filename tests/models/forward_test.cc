// Tests for the models' math: GPT-2 against an independent plain-ops
// reference, causal masking, RMSNorm and rotary against hand-computed values,
// grouped-query attention against multi-head attention with repeated k/v
// heads, BERT's attention mask and dropout, activation checkpointing
// (bitwise-equal loss and gradients) and a short training run per model.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <set>

#include "models/gpt2.h"
#include "models/llama.h"
#include "models/registry.h"
#include "util/error.h"
#include "zero/unit.h"

namespace zt::models {
namespace {

std::unique_ptr<Model> Build(const ModelSpec& spec) {
  absl::StatusOr<std::unique_ptr<Model>> m = CreateModel(spec);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

std::vector<torch::Tensor> UniqueParams(torch::nn::Module& m) {
  std::set<const void*> seen;
  std::vector<torch::Tensor> out;
  for (const auto& p : m.parameters()) {
    if (seen.insert(p.unsafeGetTensorImpl()).second) out.push_back(p);
  }
  return out;
}

torch::Tensor LmLoss(const torch::Tensor& logits, const torch::Tensor& targets) {
  return torch::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}).to(torch::kFloat), targets.reshape({-1}));
}

// GPT-2 written out from the named parameters with plain ops: per-head loops,
// an additive mask, the tanh GELU formula.
torch::Tensor Gpt2Reference(torch::nn::Module& module, int64_t n_layer, int64_t n_head, const torch::Tensor& idx) {
  auto p = module.named_parameters();
  auto ln = [&](const torch::Tensor& x, const std::string& name) {
    torch::Tensor mean = x.mean(-1, true);
    torch::Tensor var = (x - mean).pow(2).mean(-1, true);
    return (x - mean) / torch::sqrt(var + 1e-5) * p[name + ".weight"] + p[name + ".bias"];
  };
  auto conv1d = [&](const torch::Tensor& x, const std::string& name) {
    return torch::matmul(x, p[name + ".weight"]) + p[name + ".bias"];
  };
  const int64_t t = idx.size(1);
  torch::Tensor x = p["transformer.wte.weight"].index_select(0, idx.reshape({-1})).view({idx.size(0), t, -1}) +
                    p["transformer.wpe.weight"].narrow(0, 0, t);
  const int64_t d = x.size(2), hd = d / n_head;
  torch::Tensor mask = torch::full({t, t}, -1e9).triu(1);
  for (int64_t l = 0; l < n_layer; ++l) {
    const std::string b = "transformer.h." + std::to_string(l);
    torch::Tensor qkv = conv1d(ln(x, b + ".ln_1"), b + ".attn.c_attn");
    std::vector<torch::Tensor> heads;
    for (int64_t h = 0; h < n_head; ++h) {
      torch::Tensor q = qkv.narrow(2, h * hd, hd), k = qkv.narrow(2, d + h * hd, hd),
                    v = qkv.narrow(2, 2 * d + h * hd, hd);
      torch::Tensor att = torch::softmax(torch::bmm(q, k.transpose(1, 2)) / std::sqrt(double(hd)) + mask, -1);
      heads.push_back(torch::bmm(att, v));
    }
    x = x + conv1d(torch::cat(heads, -1), b + ".attn.c_proj");
    torch::Tensor u = conv1d(ln(x, b + ".ln_2"), b + ".mlp.c_fc");
    torch::Tensor g = 0.5 * u * (1 + torch::tanh(std::sqrt(2.0 / M_PI) * (u + 0.044715 * u.pow(3))));
    x = x + conv1d(g, b + ".mlp.c_proj");
  }
  return torch::matmul(ln(x, "transformer.ln_f"), p["transformer.wte.weight"].t());
}

TEST(Gpt2, MatchesPlainOpsReference) {
  for (int64_t layers : {1, 2}) {
    std::unique_ptr<Model> model = Build({"gpt2-tiny", {{"n_layer", layers}}, 3});
    ASSERT_NE(model, nullptr);
    // Non-trivial LayerNorm parameters and biases, so each one matters.
    torch::manual_seed(4);
    {
      torch::NoGradGuard no_grad;
      for (auto& p : model->module()->parameters()) p.add_(torch::randn_like(p) * 0.05);
    }
    torch::Tensor idx = torch::randint(256, {2, 11}, torch::kLong);
    torch::NoGradGuard no_grad;
    torch::Tensor ours = model->Forward(idx);
    torch::Tensor ref = Gpt2Reference(*model->module(), layers, 4, idx);
    ASSERT_EQ(ours.sizes(), (std::vector<int64_t>{2, 11, 256}));
    EXPECT_TRUE(torch::allclose(ours, ref, 1e-4, 1e-5)) << (ours - ref).abs().max().item<float>();
  }
}

TEST(Transformers, FutureTokensDoNotChangeEarlierLogits) {
  for (const char* name : {"gpt2-tiny", "llama-tiny"}) {
    SCOPED_TRACE(name);
    std::unique_ptr<Model> model = Build({name, {}, 1});
    ASSERT_NE(model, nullptr);
    torch::NoGradGuard no_grad;
    torch::Tensor a = torch::randint(256, {2, 16}, torch::kLong);
    torch::Tensor b = a.clone();
    b.index_put_({torch::indexing::Slice(), 9}, (a.index({torch::indexing::Slice(), 9}) + 1) % 256);
    torch::Tensor la = model->Forward(a), lb = model->Forward(b);
    EXPECT_EQ(la.sizes(), (std::vector<int64_t>{2, 16, 256}));
    EXPECT_TRUE(torch::equal(la.narrow(1, 0, 9), lb.narrow(1, 0, 9)));
    EXPECT_FALSE(torch::allclose(la.narrow(1, 9, 7), lb.narrow(1, 9, 7)));
  }
}

// Packed rows (document ids as the mask): each document's logits are those
// it gets alone, positions restarting with it (rotary for LLaMA and Qwen2's
// biases, learned positions for GPT-2); padding changes nothing; one
// document covering the row is the plain forward; bad ids are named.
TEST(Transformers, PackedDocumentsComputeAsAlone) {
  for (const std::string name : {"llama-tiny", "gpt2-tiny"}) {
    auto model = CreateModel({name, {}, 3, {}});
    ASSERT_TRUE(model.ok()) << model.status();
    Model& m = **model;
    m.module()->eval();
    torch::NoGradGuard no_grad;
    const int64_t v = m.info().vocab_size;
    const std::vector<int64_t> lengths = {5, 7, 3};
    std::vector<torch::Tensor> docs;
    std::vector<int64_t> ids_row, doc_row;
    for (size_t d = 0; d < lengths.size(); ++d) {
      docs.push_back(torch::randint(v, {1, lengths[d]}, torch::kLong));
      for (int64_t i = 0; i < lengths[d]; ++i) {
        ids_row.push_back(docs.back()[0][i].item<int64_t>());
        doc_row.push_back(static_cast<int64_t>(d) + 1);
      }
    }
    ids_row.push_back(0);  // padding
    doc_row.push_back(0);
    const int64_t t = static_cast<int64_t>(ids_row.size());
    torch::Tensor ids = torch::tensor(ids_row, torch::kLong).view({1, t});
    torch::Tensor documents = torch::tensor(doc_row, torch::kLong).view({1, t});
    torch::Tensor packed = m.ForwardMasked(ids, documents);
    int64_t at = 0;
    for (size_t d = 0; d < docs.size(); ++d) {
      torch::Tensor alone = m.Forward(docs[d]);
      torch::Tensor part = packed.narrow(1, at, lengths[d]);
      EXPECT_TRUE(torch::allclose(part, alone, 1e-5, 1e-5))
          << name << " document " << d << ": max diff " << (part - alone).abs().max().item<double>();
      at += lengths[d];
    }
    // One document over the whole row is the plain forward.
    torch::Tensor plain = m.Forward(ids);
    EXPECT_TRUE(torch::equal(m.ForwardMasked(ids, torch::ones_like(ids)), plain)) << name;
    EXPECT_TRUE(torch::equal(m.ForwardMasked(ids, torch::Tensor()), plain)) << name;
    EXPECT_THROW(m.ForwardMasked(ids, torch::ones({1, t - 1}, torch::kLong)), Error) << name;
    EXPECT_THROW(m.ForwardMasked(ids, -torch::ones_like(ids)), Error) << name;
  }
}

TEST(Llama, RmsNormMatchesHandComputed) {
  torch::Tensor x = torch::tensor({3.0f, 4.0f}).view({1, 2});
  torch::Tensor w = torch::tensor({1.0f, 2.0f});
  const double rms = std::sqrt(12.5 + 1e-5);
  torch::Tensor expect = torch::tensor({float(3 / rms), float(8 / rms)}).view({1, 2});
  EXPECT_TRUE(torch::allclose(RmsNorm(x, w, 1e-5), expect));
  // Computed in float32 and cast back: bf16 in, bf16 out, close to the float result.
  torch::Tensor xb = torch::randn({4, 32}).to(torch::kBFloat16);
  torch::Tensor yb = RmsNorm(xb, torch::ones({32}).to(torch::kBFloat16), 1e-5);
  EXPECT_EQ(yb.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(
      torch::allclose(yb.to(torch::kFloat), RmsNorm(xb.to(torch::kFloat), torch::ones({32}), 1e-5), 2e-2, 2e-2));
}

TEST(Llama, RotaryMatchesHandComputed) {
  // head_dim 2: one frequency (1), a rotation of (a, b) by angle p at position p.
  auto [cos2, sin2] = RotaryCosSin(4, 2, 10000.0, torch::kCPU);
  torch::Tensor x = torch::tensor({1.0f, 0.0f}).expand({4, 2});
  torch::Tensor y = ApplyRotary(x, cos2, sin2);
  for (int p = 0; p < 4; ++p) {
    EXPECT_NEAR(y[p][0].item<float>(), std::cos(p), 1e-6);
    EXPECT_NEAR(y[p][1].item<float>(), std::sin(p), 1e-6);
  }
  // head_dim 4: frequencies 1 and 1/100, laid out [f0, f1, f0, f1]; pairs (i, i + 2).
  auto [cos4, sin4] = RotaryCosSin(3, 4, 10000.0, torch::kCPU);
  EXPECT_NEAR(cos4[2][1].item<float>(), std::cos(2 / 100.0), 1e-6);
  EXPECT_NEAR(sin4[2][3].item<float>(), std::sin(2 / 100.0), 1e-6);
  torch::Tensor v = torch::tensor({1.0f, 2.0f, 3.0f, 4.0f}).expand({3, 4});
  torch::Tensor r = ApplyRotary(v, cos4, sin4);
  EXPECT_TRUE(torch::equal(r[0], v[0])) << "position 0 is the identity";
  const double a = 2.0, a1 = 2 / 100.0;
  torch::Tensor expect =
      torch::tensor({float(1 * std::cos(a) - 3 * std::sin(a)), float(2 * std::cos(a1) - 4 * std::sin(a1)),
                     float(3 * std::cos(a) + 1 * std::sin(a)), float(4 * std::cos(a1) + 2 * std::sin(a1))});
  EXPECT_TRUE(torch::allclose(r[2], expect, 1e-5, 1e-6)) << r[2] << expect;
}

TEST(Llama, RotaryScoresDependOnlyOnRelativePosition) {
  torch::manual_seed(5);
  const int64_t t = 12, hd = 16;
  auto [cos, sin] = RotaryCosSin(t, hd, 10000.0, torch::kCPU);
  torch::Tensor q = ApplyRotary(torch::randn({hd}).expand({t, hd}), cos, sin);
  torch::Tensor k = ApplyRotary(torch::randn({hd}).expand({t, hd}), cos, sin);
  torch::Tensor s = torch::matmul(q.to(torch::kDouble), k.to(torch::kDouble).t());  // s[i][j] = q_i . k_j
  for (int64_t delta : {0, 1, 3, 7}) {
    for (int64_t i = delta + 1; i < t; ++i) {
      EXPECT_NEAR(s[i][i - delta].item<double>(), s[delta][0].item<double>(), 1e-4) << i << " " << delta;
    }
  }
  EXPECT_GT(std::abs(s[1][0].item<double>() - s[5][0].item<double>()), 1e-3) << "scores must change with distance";
}

TEST(Llama, GroupedQueryAttentionEqualsMultiHeadWithRepeatedKv) {
  std::unique_ptr<Model> gqa = Build({"llama-tiny", {{"n_layer", 1}, {"n_kv_head", 2}}, 1});
  std::unique_ptr<Model> mha = Build({"llama-tiny", {{"n_layer", 1}, {"n_kv_head", 4}}, 2});
  ASSERT_TRUE(gqa && mha);
  {
    torch::NoGradGuard no_grad;
    auto src = gqa->module()->named_parameters();
    for (auto& item : mha->module()->named_parameters()) {
      torch::Tensor from = src[item.key()];
      if (item.key().find("k_proj") != std::string::npos || item.key().find("v_proj") != std::string::npos) {
        // kv head j serves query heads 2j and 2j + 1: repeat each head's 16 rows.
        from = from.view({2, 1, 16, 64}).expand({2, 2, 16, 64}).reshape({64, 64});
      }
      item.value().copy_(from);
    }
  }
  torch::NoGradGuard no_grad;
  torch::Tensor idx = torch::randint(256, {2, 10}, torch::kLong);
  torch::Tensor a = gqa->Forward(idx), b = mha->Forward(idx);
  EXPECT_TRUE(torch::allclose(a, b, 1e-5, 1e-6)) << (a - b).abs().max().item<float>();
}

// Loss and every gradient of a checkpointed model equal the plain model's, bit for bit.
TEST(Models, ActivationCheckpointingIsBitwiseEqual) {
  struct Case {
    ModelSpec spec;
    int units;
  };
  for (const Case& c : std::vector<Case>{{{"gpt2-tiny", {{"n_layer", 3}}, 1}, 3},
                                         {{"llama-tiny", {{"n_layer", 3}}, 1}, 3},
                                         {{"bert-tiny", {{"n_layer", 3}, {"vocab", 256}}, 1}, 3},
                                         {{"mnist-cnn", {}, 1}, 4}}) {
    SCOPED_TRACE(c.spec.name);
    std::unique_ptr<Model> plain = Build(c.spec), ckpt = Build(c.spec);
    ASSERT_TRUE(plain && ckpt);
    EXPECT_EQ(ckpt->CheckpointActivations(1), 1);
    auto marked = [&ckpt] {
      int n = 0;
      for (const auto& m : ckpt->module()->modules()) {
        UnitBase* u = AsUnit(*m);
        n += (u != nullptr && u->activation_checkpointing()) ? 1 : 0;
      }
      return n;
    };
    EXPECT_EQ(marked(), 1);
    EXPECT_EQ(ckpt->CheckpointActivations(0), c.units);
    EXPECT_EQ(marked(), c.units);
    torch::Tensor loss[2];
    std::unique_ptr<Model>* models[2] = {&plain, &ckpt};
    torch::manual_seed(9);
    torch::Tensor x, y;
    if (plain->info().task == Task::kLanguageModel) {
      torch::Tensor tok = torch::randint(256, {2, 13}, torch::kLong);
      x = tok.narrow(1, 0, 12);
      y = tok.narrow(1, 1, 12);
    } else if (plain->info().task == Task::kSequenceClassification) {
      x = torch::randint(256, {2, 12}, torch::kLong);
      y = torch::randint(2, {2}, torch::kLong);
    } else {
      x = torch::randn({4, 1, 28, 28});
      y = torch::randint(10, {4}, torch::kLong);
    }
    for (int i = 0; i < 2; ++i) {
      Model& m = **models[i];
      m.module()->eval();  // no dropout (mnist-cnn)
      torch::Tensor out = m.Forward(x);
      loss[i] = m.info().task == Task::kLanguageModel            ? LmLoss(out, y)
                : m.info().task == Task::kSequenceClassification ? torch::cross_entropy_loss(out, y)
                                                                 : torch::nll_loss(out, y);
      loss[i].backward();
    }
    EXPECT_TRUE(torch::equal(loss[0], loss[1])) << loss[0].item<float>() << " vs " << loss[1].item<float>();
    auto pa = plain->module()->named_parameters(), pb = ckpt->module()->named_parameters();
    for (const auto& item : pa) {
      ASSERT_TRUE(pb[item.key()].grad().defined()) << item.key();
      EXPECT_TRUE(torch::equal(item.value().grad(), pb[item.key()].grad())) << item.key();
    }
  }
}

TEST(Models, TwentyAdamWStepsReduceTheLoss) {
  for (const char* name : {"gpt2-tiny", "llama-tiny", "mnist-cnn", "bert-tiny"}) {
    SCOPED_TRACE(name);
    std::unique_ptr<Model> model = Build({name, {}, 1});
    ASSERT_NE(model, nullptr);
    const bool lm = model->info().task == Task::kLanguageModel;
    const bool seq = model->info().task == Task::kSequenceClassification;
    torch::manual_seed(11);
    torch::Tensor x, y;
    if (lm) {
      torch::Tensor tok = torch::randint(256, {4, 33}, torch::kLong);
      x = tok.narrow(1, 0, 32);
      y = tok.narrow(1, 1, 32);
    } else if (seq) {
      x = torch::randint(1000, {16, 16}, torch::kLong);
      y = torch::randint(2, {16}, torch::kLong);
    } else {
      x = torch::randn({16, 1, 28, 28});
      y = torch::randint(10, {16}, torch::kLong);
    }
    auto loss_of = [&] {
      torch::Tensor out = model->Forward(x);
      return lm ? LmLoss(out, y) : seq ? torch::cross_entropy_loss(out, y) : torch::nll_loss(out, y);
    };
    torch::optim::AdamW opt(UniqueParams(*model->module()), torch::optim::AdamWOptions(3e-3).weight_decay(0.0));
    model->module()->eval();
    const float first = loss_of().item<float>();
    for (int step = 0; step < 20; ++step) {
      model->module()->train();
      opt.zero_grad();
      loss_of().backward();
      opt.step();
    }
    model->module()->eval();
    const float last = loss_of().item<float>();
    EXPECT_TRUE(std::isfinite(last));
    EXPECT_LT(last, 0.8f * first) << "first " << first << " last " << last;
  }
}

// Padding with junk tokens masked out leaves each sequence's logits as
// they were unpadded (HF's attention_mask); unmasked, the junk changes them.
TEST(Bert, MaskedPaddingDoesNotChangeLogits) {
  std::unique_ptr<Model> model = Build({"bert-tiny", {{"vocab", 500}, {"num_labels", 3}}, 2});
  ASSERT_NE(model, nullptr);
  {  // non-trivial norms and biases, so the padding would show through them
    torch::manual_seed(4);
    torch::NoGradGuard no_grad;
    for (auto& p : model->module()->parameters()) p.add_(torch::randn_like(p) * 0.05);
  }
  model->module()->eval();
  torch::NoGradGuard no_grad;
  torch::manual_seed(6);
  const torch::Tensor a = torch::randint(1, 500, {1, 7}, torch::kLong);
  const torch::Tensor b = torch::randint(1, 500, {1, 12}, torch::kLong);
  const torch::Tensor alone_a = model->Forward(a), alone_b = model->Forward(b);
  ASSERT_EQ(alone_a.sizes(), (std::vector<int64_t>{1, 3}));
  // One batch: a padded to 12 with junk ids (not even the pad id), masked.
  torch::Tensor ids = torch::cat({torch::cat({a, torch::randint(1, 500, {1, 5}, torch::kLong)}, 1), b}, 0);
  torch::Tensor mask = torch::ones({2, 12}, torch::kLong);
  mask.index_put_({0, torch::indexing::Slice(7, 12)}, 0);
  const torch::Tensor batched = model->ForwardMasked(ids, mask);
  ASSERT_EQ(batched.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(torch::allclose(batched[0], alone_a[0], 1e-5, 1e-5)) << (batched[0] - alone_a[0]).abs().max();
  EXPECT_TRUE(torch::allclose(batched[1], alone_b[0], 1e-5, 1e-5)) << (batched[1] - alone_b[0]).abs().max();
  // The same padding unmasked is attended to and changes the logits.
  const torch::Tensor unmasked = model->Forward(ids);
  EXPECT_GT((unmasked[0] - alone_a[0]).abs().max().item<float>(), 1e-3);
  // An all-ones mask is Forward.
  EXPECT_TRUE(torch::equal(model->ForwardMasked(ids, torch::ones({2, 12}, torch::kLong)), unmasked));
  // bf16: the additive mask uses bf16's lowest value and padding still does not leak.
  model->module()->to(torch::kBFloat16);
  const torch::Tensor batched16 = model->ForwardMasked(ids, mask).to(torch::kFloat);
  const torch::Tensor alone16 = model->Forward(a).to(torch::kFloat);
  EXPECT_TRUE(torch::allclose(batched16[0], alone16[0], 2e-2, 2e-2)) << batched16[0] << alone16[0];
}

// Dropout (the "dropout" override, in percent) acts in training mode only.
TEST(Bert, DropoutOnlyInTraining) {
  std::unique_ptr<Model> model = Build({"bert-tiny", {{"vocab", 300}, {"dropout", 30}}, 3});
  ASSERT_NE(model, nullptr);
  torch::NoGradGuard no_grad;
  const torch::Tensor ids = torch::randint(300, {4, 16}, torch::kLong);
  model->module()->eval();
  const torch::Tensor e1 = model->Forward(ids), e2 = model->Forward(ids);
  EXPECT_TRUE(torch::equal(e1, e2)) << "eval must be deterministic";
  model->module()->train();
  const torch::Tensor t1 = model->Forward(ids), t2 = model->Forward(ids);
  EXPECT_FALSE(torch::allclose(t1, t2)) << "training must drop";
  EXPECT_FALSE(torch::allclose(t1, e1));
  // Without the override the presets have no dropout: train equals eval.
  std::unique_ptr<Model> plain = Build({"bert-tiny", {{"vocab", 300}}, 3});
  plain->module()->train();
  const torch::Tensor p1 = plain->Forward(ids);
  plain->module()->eval();
  EXPECT_TRUE(torch::equal(p1, plain->Forward(ids)));
}

// The padding row of the word embeddings gets no gradient (padding_idx).
TEST(Bert, PadTokenRowGetsNoGradient) {
  std::unique_ptr<Model> model = Build({"bert-tiny", {{"n_layer", 1}, {"vocab", 50}}, 1});
  ASSERT_NE(model, nullptr);
  const torch::Tensor ids = torch::tensor({{5, 7, 0, 0}, {9, 0, 3, 0}}, torch::kLong);
  torch::cross_entropy_loss(model->Forward(ids), torch::tensor({0, 1}, torch::kLong)).backward();
  const torch::Tensor g = model->module()->named_parameters()["bert.embeddings.word_embeddings.weight"].grad();
  EXPECT_TRUE(torch::equal(g[0], torch::zeros({128})));
  EXPECT_GT(g[5].abs().sum().item<float>(), 0);
}

}  // namespace
}  // namespace zt::models
