// Tests for models/registry.h: every preset resolves, analytic sizes equal
// the built models' and the published counts, Hugging Face parameter names,
// error messages, seeding and input checks.
#include "models/registry.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>
#include <set>

#include "models/model.h"
#include "util/error.h"

namespace zt::models {
namespace {

// Parameters counted once per tensor (a tied weight has two names).
int64_t UniqueParamCount(torch::nn::Module& m) {
  std::set<const void*> seen;
  int64_t n = 0;
  for (const auto& p : m.parameters()) {
    if (seen.insert(p.unsafeGetTensorImpl()).second) n += p.numel();
  }
  return n;
}

std::unique_ptr<Model> Build(const ModelSpec& spec) {
  absl::StatusOr<std::unique_ptr<Model>> m = CreateModel(spec);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

TEST(ModelRegistry, EveryPresetDescribes) {
  const std::vector<std::string> names = ModelNames();
  ASSERT_GE(names.size(), 11u);
  for (const std::string& name : names) {
    absl::StatusOr<ModelInfo> info = DescribeModel(ModelSpec{name, {}, 1});
    ASSERT_TRUE(info.ok()) << name << ": " << info.status();
    EXPECT_EQ(info->name, name);
    EXPECT_GT(info->num_params, 0) << name;
    if (info->task == Task::kLanguageModel) {
      EXPECT_GT(info->vocab_size, 0) << name;
      EXPECT_GT(info->max_seq_len, 0) << name;
    } else if (info->task == Task::kSequenceClassification) {
      EXPECT_EQ(info->vocab_size, 30522) << name;
      EXPECT_EQ(info->max_seq_len, 512) << name;
      EXPECT_EQ(info->num_classes, 2) << name;
    } else {
      EXPECT_EQ(info->num_classes, 10) << name;
      EXPECT_EQ(info->image_size, 28) << name;
    }
  }
}

TEST(ModelRegistry, PublishedParameterCounts) {
  // Hugging Face num_parameters() of gpt2*, TinyLlama-1.1B, Llama-2-7b; the
  // PyTorch MNIST example's Net; BertForSequenceClassification (2 labels) of
  // google/bert_uncased_L-2_H-128_A-2 (BertModel 4385920), bert-base-uncased
  // (BertModel 109482240) and bert-large-uncased (BertModel 335141888), the
  // head adding hidden * 2 + 2.
  const std::vector<std::pair<std::string, int64_t>> cases = {
      {"gpt2", 124439808},      {"gpt2-medium", 354823168}, {"gpt2-large", 774030080}, {"gpt2-xl", 1557611200},
      {"llama-1b", 1100048384}, {"llama-7b", 6738415616},   {"mnist-cnn", 1199882},    {"bert-tiny", 4386178},
      {"bert-base", 109483778}, {"bert-large", 335143938},
  };
  for (const auto& [name, count] : cases) {
    absl::StatusOr<ModelInfo> info = DescribeModel(ModelSpec{name, {}, 1});
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->num_params, count) << name;
  }
}

TEST(ModelRegistry, AnalyticCountEqualsBuiltModel) {
  const std::vector<ModelSpec> specs = {
      {"gpt2-tiny", {}, 1},
      {"gpt2-mini", {}, 1},
      {"gpt2-tiny", {{"n_layer", 3}, {"n_embd", 48}, {"n_head", 6}, {"seq_len", 32}, {"vocab", 100}}, 1},
      {"llama-tiny", {}, 1},
      {"llama-mini", {}, 1},
      {"llama-tiny", {{"n_kv_head", 1}, {"intermediate", 100}, {"vocab", 77}}, 1},
      {"llama-tiny", {{"n_layer", 3}, {"n_embd", 96}, {"n_head", 6}, {"n_kv_head", 6}, {"seq_len", 16}}, 1},
      {"mnist-cnn", {}, 1},
      {"bert-tiny", {}, 1},
      {"bert-tiny",
       {{"n_layer", 3},
        {"n_embd", 48},
        {"n_head", 6},
        {"intermediate", 80},
        {"seq_len", 32},
        {"vocab", 100},
        {"num_labels", 5}},
       1},
  };
  for (const ModelSpec& spec : specs) {
    SCOPED_TRACE(spec.name);
    absl::StatusOr<ModelInfo> info = DescribeModel(spec);
    ASSERT_TRUE(info.ok()) << info.status();
    std::unique_ptr<Model> model = Build(spec);
    ASSERT_NE(model, nullptr);
    EXPECT_EQ(UniqueParamCount(*model->module()), info->num_params);
    EXPECT_EQ(model->info().num_params, info->num_params);
  }
}

// name -> shape, in registration order.
using Shapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

Shapes NamedShapes(torch::nn::Module& m) {
  Shapes out;
  for (const auto& item : m.named_parameters()) out.emplace_back(item.key(), item.value().sizes().vec());
  return out;
}

TEST(ModelRegistry, Gpt2HasHuggingFaceNamesAndLayouts) {
  std::unique_ptr<Model> model = Build({"gpt2-tiny", {{"n_layer", 1}}, 1});
  ASSERT_NE(model, nullptr);
  const Shapes expected = {
      {"transformer.wte.weight", {256, 64}},
      {"transformer.wpe.weight", {128, 64}},
      {"transformer.h.0.ln_1.weight", {64}},
      {"transformer.h.0.ln_1.bias", {64}},
      {"transformer.h.0.attn.c_attn.weight", {64, 192}},  // Conv1D: [in, out]
      {"transformer.h.0.attn.c_attn.bias", {192}},
      {"transformer.h.0.attn.c_proj.weight", {64, 64}},
      {"transformer.h.0.attn.c_proj.bias", {64}},
      {"transformer.h.0.ln_2.weight", {64}},
      {"transformer.h.0.ln_2.bias", {64}},
      {"transformer.h.0.mlp.c_fc.weight", {64, 256}},
      {"transformer.h.0.mlp.c_fc.bias", {256}},
      {"transformer.h.0.mlp.c_proj.weight", {256, 64}},
      {"transformer.h.0.mlp.c_proj.bias", {64}},
      {"transformer.ln_f.weight", {64}},
      {"transformer.ln_f.bias", {64}},
      {"lm_head.weight", {256, 64}},
  };
  EXPECT_EQ(NamedShapes(*model->module()), expected);
  auto params = model->module()->named_parameters();
  EXPECT_TRUE(params["lm_head.weight"].is_same(params["transformer.wte.weight"])) << "lm_head must be tied to wte";
}

TEST(ModelRegistry, LlamaHasHuggingFaceNamesAndLayouts) {
  std::unique_ptr<Model> model = Build({"llama-tiny", {{"n_layer", 1}}, 1});
  ASSERT_NE(model, nullptr);
  const Shapes expected = {
      {"model.embed_tokens.weight", {256, 64}},
      {"model.layers.0.self_attn.q_proj.weight", {64, 64}},
      {"model.layers.0.self_attn.k_proj.weight", {32, 64}},  // 2 kv heads of 16
      {"model.layers.0.self_attn.v_proj.weight", {32, 64}},
      {"model.layers.0.self_attn.o_proj.weight", {64, 64}},
      {"model.layers.0.mlp.gate_proj.weight", {172, 64}},
      {"model.layers.0.mlp.up_proj.weight", {172, 64}},
      {"model.layers.0.mlp.down_proj.weight", {64, 172}},
      {"model.layers.0.input_layernorm.weight", {64}},
      {"model.layers.0.post_attention_layernorm.weight", {64}},
      {"model.norm.weight", {64}},
      {"lm_head.weight", {256, 64}},
  };
  EXPECT_EQ(NamedShapes(*model->module()), expected);
  EXPECT_TRUE(model->module()->named_buffers().is_empty()) << "rotary tables must not be saved or sharded";
}

TEST(ModelRegistry, BertHasHuggingFaceNamesAndLayouts) {
  std::unique_ptr<Model> model = Build({"bert-tiny", {{"n_layer", 1}, {"vocab", 100}, {"num_labels", 3}}, 1});
  ASSERT_NE(model, nullptr);
  const std::string l = "bert.encoder.layer.0.";
  const Shapes expected = {
      {"bert.embeddings.word_embeddings.weight", {100, 128}},
      {"bert.embeddings.position_embeddings.weight", {512, 128}},
      {"bert.embeddings.token_type_embeddings.weight", {2, 128}},
      {"bert.embeddings.LayerNorm.weight", {128}},
      {"bert.embeddings.LayerNorm.bias", {128}},
      {l + "attention.self.query.weight", {128, 128}},  // torch Linear: [out, in]
      {l + "attention.self.query.bias", {128}},
      {l + "attention.self.key.weight", {128, 128}},
      {l + "attention.self.key.bias", {128}},
      {l + "attention.self.value.weight", {128, 128}},
      {l + "attention.self.value.bias", {128}},
      {l + "attention.output.dense.weight", {128, 128}},
      {l + "attention.output.dense.bias", {128}},
      {l + "attention.output.LayerNorm.weight", {128}},
      {l + "attention.output.LayerNorm.bias", {128}},
      {l + "intermediate.dense.weight", {512, 128}},
      {l + "intermediate.dense.bias", {512}},
      {l + "output.dense.weight", {128, 512}},
      {l + "output.dense.bias", {128}},
      {l + "output.LayerNorm.weight", {128}},
      {l + "output.LayerNorm.bias", {128}},
      {"bert.pooler.dense.weight", {128, 128}},
      {"bert.pooler.dense.bias", {128}},
      {"classifier.weight", {3, 128}},
      {"classifier.bias", {3}},
  };
  EXPECT_EQ(NamedShapes(*model->module()), expected);
  EXPECT_TRUE(model->module()->named_buffers().is_empty()) << "no position_ids buffer (HF's is not persistent)";
  EXPECT_EQ(model->info().task, Task::kSequenceClassification);
  EXPECT_EQ(model->info().num_classes, 3);
}

// HF's _init_weights: Linear N(0, 0.02) with zero bias, embeddings N(0, 0.02)
// with the pad row (id 0) zero, LayerNorm 1 and 0; the same seed, the same weights.
TEST(ModelRegistry, BertInitializesLikeHuggingFace) {
  std::unique_ptr<Model> model = Build({"bert-tiny", {{"vocab", 2000}}, 5});
  std::unique_ptr<Model> again = Build({"bert-tiny", {{"vocab", 2000}}, 5});
  ASSERT_TRUE(model && again);
  auto p = model->module()->named_parameters();
  auto q = again->module()->named_parameters();
  for (const auto& item : p) {
    SCOPED_TRACE(item.key());
    const torch::Tensor& t = item.value();
    EXPECT_TRUE(torch::equal(t, q[item.key()]));
    if (item.key().find("LayerNorm.weight") != std::string::npos) {
      EXPECT_TRUE(torch::equal(t, torch::ones_like(t)));
    } else if (item.key().find(".bias") != std::string::npos) {
      EXPECT_TRUE(torch::equal(t, torch::zeros_like(t)));
    } else {
      const torch::Tensor rows =
          item.key() == "bert.embeddings.word_embeddings.weight" ? t.narrow(0, 1, t.size(0) - 1) : t;
      EXPECT_NEAR(rows.std().item<double>(), 0.02, 0.004);
      EXPECT_NEAR(rows.mean().item<double>(), 0.0, 0.004);
    }
  }
  EXPECT_TRUE(torch::equal(p["bert.embeddings.word_embeddings.weight"][0], torch::zeros({128})))
      << "the padding row (pad_token_id 0) starts at zero";
}

TEST(ModelRegistry, MnistCnnHasPyTorchExampleNames) {
  std::unique_ptr<Model> model = Build({"mnist-cnn", {}, 1});
  ASSERT_NE(model, nullptr);
  const Shapes expected = {
      {"conv1.weight", {32, 1, 3, 3}}, {"conv1.bias", {32}}, {"conv2.weight", {64, 32, 3, 3}}, {"conv2.bias", {64}},
      {"fc1.weight", {128, 9216}},     {"fc1.bias", {128}},  {"fc2.weight", {10, 128}},        {"fc2.bias", {10}},
  };
  EXPECT_EQ(NamedShapes(*model->module()), expected);
}

TEST(ModelRegistry, ErrorsNameTheProblem) {
  struct Case {
    ModelSpec spec;
    std::vector<std::string> mentions;
  };
  const std::vector<Case> cases = {
      {{"gpt3", {}, 1}, {"unknown model 'gpt3'", "gpt2-tiny", "llama-tiny", "mnist-cnn"}},
      {{"gpt2-tiny", {{"n_kv_head", 2}}, 1}, {"unknown override 'n_kv_head'", "n_layer", "seq_len", "dropout"}},
      {{"llama-tiny", {{"dropout", 10}}, 1}, {"unknown override 'dropout'", "n_kv_head", "intermediate"}},
      {{"mnist-cnn", {{"n_layer", 2}}, 1}, {"unknown override 'n_layer'", "no overrides"}},
      {{"gpt2-tiny", {{"n_embd", 65}}, 1}, {"n_embd 65", "n_head 4", "multiple"}},
      {{"llama-tiny", {{"n_kv_head", 3}}, 1}, {"n_head 4", "n_kv_head 3"}},
      {{"llama-tiny", {{"n_embd", 36}, {"n_head", 4}}, 1}, {"odd", "rotary"}},
      {{"gpt2-tiny", {{"n_layer", 0}}, 1}, {"n_layer 0"}},
      {{"llama-tiny", {{"vocab", -5}}, 1}, {"vocab -5"}},
      {{"gpt2-tiny", {{"dropout", 100}}, 1}, {"dropout 100"}},
      {{"bert-tiny", {{"n_kv_head", 2}}, 1}, {"unknown override 'n_kv_head'", "num_labels", "intermediate", "dropout"}},
      {{"bert-tiny", {{"n_embd", 129}}, 1}, {"n_embd 129", "n_head 2", "multiple"}},
      {{"bert-tiny", {{"num_labels", 0}}, 1}, {"num_labels 0"}},
      {{"bert-base", {{"dropout", -1}}, 1}, {"dropout -1"}},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ModelInfo> info = DescribeModel(c.spec);
    ASSERT_FALSE(info.ok()) << c.spec.name;
    EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
    for (const std::string& m : c.mentions) {
      EXPECT_NE(info.status().message().find(m), std::string::npos) << info.status() << "\nshould mention: " << m;
    }
    absl::StatusOr<std::unique_ptr<Model>> model = CreateModel(c.spec);
    ASSERT_FALSE(model.ok());
    EXPECT_EQ(model.status(), info.status());
  }
}

TEST(ModelRegistry, SeedDeterminesWeights) {
  auto weights = [](uint64_t seed) {
    std::unique_ptr<Model> m = Build({"llama-tiny", {{"n_layer", 1}}, seed});
    std::vector<torch::Tensor> out;
    for (const auto& p : m->module()->parameters()) out.push_back(p.detach().clone());
    return out;
  };
  std::vector<torch::Tensor> a = weights(7), b = weights(7), c = weights(8);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << i;
  EXPECT_FALSE(torch::equal(a[0], c[0]));
}

TEST(ModelRegistry, HelpListsEveryPreset) {
  const std::string help = ModelHelp();
  int lines = 0;
  for (char ch : help) lines += ch == '\n' ? 1 : 0;
  EXPECT_EQ(lines, static_cast<int>(ModelNames().size()));
  for (const std::string& name : ModelNames()) EXPECT_NE(help.find(name + " "), std::string::npos) << name;
  EXPECT_NE(help.find("124.4M"), std::string::npos) << help;
  EXPECT_NE(help.find("1.56B"), std::string::npos) << help;
  EXPECT_NE(help.find("109.5M"), std::string::npos) << help;  // bert-base
}

TEST(ModelRegistry, ForwardRejectsBadInputs) {
  std::unique_ptr<Model> gpt = Build({"gpt2-tiny", {{"n_layer", 1}, {"seq_len", 8}}, 1});
  std::unique_ptr<Model> cnn = Build({"mnist-cnn", {}, 1});
  ASSERT_TRUE(gpt && cnn);
  EXPECT_EQ(gpt->Forward(torch::zeros({2, 8}, torch::kLong)).sizes(), (std::vector<int64_t>{2, 8, 256}));
  EXPECT_EQ(gpt->Forward(torch::zeros({1, 3}, torch::kInt)).sizes(), (std::vector<int64_t>{1, 3, 256}));
  EXPECT_THROW(gpt->Forward(torch::zeros({2, 9}, torch::kLong)), Error);  // longer than seq_len
  EXPECT_THROW(gpt->Forward(torch::zeros({8}, torch::kLong)), Error);
  EXPECT_THROW(gpt->Forward(torch::zeros({2, 8})), Error);                    // float ids
  EXPECT_THROW(gpt->Forward(torch::full({1, 4}, 256, torch::kLong)), Error);  // id >= vocab
  EXPECT_THROW(gpt->Forward(torch::full({1, 4}, -1, torch::kLong)), Error);
  EXPECT_EQ(cnn->Forward(torch::zeros({3, 1, 28, 28})).sizes(), (std::vector<int64_t>{3, 10}));
  EXPECT_THROW(cnn->Forward(torch::zeros({3, 28, 28})), Error);
  EXPECT_THROW(cnn->Forward(torch::zeros({3, 1, 28, 28}, torch::kLong)), Error);
  // Models without masks refuse one; causal models take document ids
  // (packed samples) shaped like the tokens.
  EXPECT_THROW(cnn->ForwardMasked(torch::zeros({3, 1, 28, 28}), torch::ones({3, 4}, torch::kLong)), Error);
  EXPECT_EQ(cnn->ForwardMasked(torch::zeros({3, 1, 28, 28}), at::Tensor()).sizes(), (std::vector<int64_t>{3, 10}));
  EXPECT_EQ(gpt->ForwardMasked(torch::zeros({1, 4}, torch::kLong), torch::ones({1, 4}, torch::kLong)).sizes(),
            (std::vector<int64_t>{1, 4, 256}));
  EXPECT_THROW(gpt->ForwardMasked(torch::zeros({1, 4}, torch::kLong), torch::ones({1, 3}, torch::kLong)), Error);
  EXPECT_THROW(gpt->ForwardMasked(torch::zeros({1, 4}, torch::kLong), torch::ones({1, 4})), Error);  // float ids
  EXPECT_EQ(gpt->ForwardMasked(torch::zeros({1, 4}, torch::kLong), at::Tensor()).sizes(),
            (std::vector<int64_t>{1, 4, 256}));
}

// BERT's ForwardMasked: the mask's shape, dtype and values, and the [CLS]
// position, each refused with zt::Error naming the model.
TEST(ModelRegistry, BertForwardMaskedRejectsBadMasks) {
  std::unique_ptr<Model> bert = Build({"bert-tiny", {{"n_layer", 1}, {"seq_len", 8}, {"vocab", 50}}, 1});
  ASSERT_NE(bert, nullptr);
  const torch::Tensor ids = torch::randint(50, {2, 6}, torch::kLong);
  const torch::Tensor ones = torch::ones({2, 6}, torch::kLong);
  EXPECT_EQ(bert->Forward(ids).sizes(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(bert->ForwardMasked(ids, ones).sizes(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(bert->ForwardMasked(ids, ones.to(torch::kInt)).sizes(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(bert->ForwardMasked(ids, ones.to(torch::kBool)).sizes(), (std::vector<int64_t>{2, 2}));
  auto message = [&](const torch::Tensor& mask) -> std::string {
    try {
      bert->ForwardMasked(ids, mask);
    } catch (const Error& e) {
      EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
      return e.what();
    }
    return "no error";
  };
  auto expect_mentions = [](const std::string& m, const std::vector<std::string>& parts) {
    for (const std::string& p : parts) EXPECT_NE(m.find(p), std::string::npos) << m << "\nshould mention: " << p;
  };
  expect_mentions(message(torch::ones({2, 5}, torch::kLong)), {"model bert-tiny", "attention mask", "shape"});
  expect_mentions(message(torch::ones({6}, torch::kLong)), {"model bert-tiny", "shape"});
  expect_mentions(message(torch::ones({2, 6})), {"model bert-tiny", "integers", "Float"});
  expect_mentions(message(torch::full({2, 6}, 2, torch::kLong)), {"model bert-tiny", "0 and 1"});
  torch::Tensor left_padded = ones.clone();
  left_padded[1][0] = 0;
  expect_mentions(message(left_padded), {"model bert-tiny", "first position of row 1", "[CLS]"});
  EXPECT_THROW(bert->ForwardMasked(torch::full({1, 4}, 50, torch::kLong), torch::ones({1, 4}, torch::kLong)),
               Error);                                                     // id >= vocab
  EXPECT_THROW(bert->Forward(torch::zeros({1, 9}, torch::kLong)), Error);  // longer than seq_len
}

}  // namespace
}  // namespace zt::models

namespace zt::models {
namespace {

// The transformers config written next to exports: valid JSON with the
// model's dimensions under transformers' key names.
TEST(ModelRegistry, HuggingFaceConfigJson) {
  ModelSpec gpt;
  gpt.name = "gpt2-xl";
  auto text = HfConfigJson(gpt);
  ASSERT_TRUE(text.ok()) << text.status();
  auto j = nlohmann::json::parse(*text);
  EXPECT_EQ(j["model_type"], "gpt2");
  EXPECT_EQ(j["n_embd"], 1600);
  EXPECT_EQ(j["n_layer"], 48);
  EXPECT_EQ(j["n_head"], 25);
  EXPECT_EQ(j["vocab_size"], 50257);
  EXPECT_EQ(j["tie_word_embeddings"], true);

  ModelSpec llama;
  llama.name = "llama-tiny";
  llama.overrides["n_layer"] = 3;
  text = HfConfigJson(llama);
  ASSERT_TRUE(text.ok()) << text.status();
  j = nlohmann::json::parse(*text);
  EXPECT_EQ(j["model_type"], "llama");
  EXPECT_EQ(j["num_hidden_layers"], 3);
  EXPECT_EQ(j["num_key_value_heads"], 2);
  EXPECT_EQ(j["intermediate_size"], 172);
  EXPECT_EQ(j["hidden_size"], 64);

  ModelSpec bert;
  bert.name = "bert-base";
  bert.overrides["num_labels"] = 3;
  text = HfConfigJson(bert);
  ASSERT_TRUE(text.ok()) << text.status();
  j = nlohmann::json::parse(*text);
  EXPECT_EQ(j["model_type"], "bert");
  EXPECT_EQ(j["architectures"], nlohmann::json::array({"BertForSequenceClassification"}));
  EXPECT_EQ(j["hidden_size"], 768);
  EXPECT_EQ(j["num_hidden_layers"], 12);
  EXPECT_EQ(j["num_attention_heads"], 12);
  EXPECT_EQ(j["intermediate_size"], 3072);
  EXPECT_EQ(j["max_position_embeddings"], 512);
  EXPECT_EQ(j["vocab_size"], 30522);
  EXPECT_EQ(j["type_vocab_size"], 2);
  EXPECT_EQ(j["hidden_act"], "gelu");
  EXPECT_EQ(j["position_embedding_type"], "absolute");
  EXPECT_EQ(j["layer_norm_eps"], 1e-12);
  EXPECT_EQ(j["pad_token_id"], 0);
  EXPECT_TRUE(j["classifier_dropout"].is_null());
  EXPECT_EQ(j["id2label"], nlohmann::json({{"0", "LABEL_0"}, {"1", "LABEL_1"}, {"2", "LABEL_2"}}));
  EXPECT_EQ(j["label2id"], nlohmann::json({{"LABEL_0", 0}, {"LABEL_1", 1}, {"LABEL_2", 2}}));

  ModelSpec cnn;
  cnn.name = "mnist-cnn";
  text = HfConfigJson(cnn);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "");
  ModelSpec bad;
  bad.name = "gpt3";
  EXPECT_FALSE(HfConfigJson(bad).ok());
}

}  // namespace
}  // namespace zt::models
