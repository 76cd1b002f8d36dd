// LoRA layers and ApplyLora on their own:
//  * zt::LoraLinear is torch::nn::Linear (same names, same random draws,
//    same outputs) until it gets an adapter;
//  * a fresh adapter leaves the output unchanged (B = 0); with values, the
//    output is the plain formula base(x) + alpha / r * x A^T B^T, on a
//    Linear and on GPT-2's Conv1D ([in, out] weights);
//  * dropout acts in training only;
//  * ApplyLora adapts exactly the targets (and "all-linear" all but
//    lm_head), freezes the rest, and refuses bad options by name;
//  * the built-in models with spec.lora get the adapters and keep their base
//    weights (same seed, same base values as without LoRA).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "lora/apply_lora.h"
#include "lora/lora_linear.h"
#include "models/gpt2.h"
#include "models/registry.h"

namespace zt {
namespace {

TEST(LoraLinear, IsTorchLinearWithoutAnAdapter) {
  for (bool bias : {true, false}) {
    torch::manual_seed(7);
    torch::nn::Linear ref(torch::nn::LinearOptions(13, 5).bias(bias));
    torch::manual_seed(7);
    LoraLinear ours(torch::nn::LinearOptions(13, 5).bias(bias));
    std::vector<std::string> ref_names, our_names;
    for (const auto& p : ref->named_parameters()) ref_names.push_back(p.key());
    for (const auto& p : ours->named_parameters()) our_names.push_back(p.key());
    EXPECT_EQ(ref_names, our_names);
    EXPECT_TRUE(torch::equal(ref->weight, ours->weight));
    if (bias) {
      EXPECT_TRUE(torch::equal(ref->bias, ours->bias));
    }
    torch::Tensor x = torch::randn({3, 4, 13});
    EXPECT_TRUE(torch::equal(ref(x), ours(x)));
  }
}

TEST(LoraLinear, AdapterAddsScaledLowRankUpdate) {
  torch::manual_seed(1);
  LoraLinear layer(torch::nn::LinearOptions(6, 4));
  torch::Tensor x = torch::randn({5, 6});
  torch::Tensor before = layer(x);
  LoraOptions o;
  o.r = 2;
  o.alpha = 6;
  layer->AddLora(*layer, o, layer->weight);
  EXPECT_TRUE(torch::equal(before, layer(x))) << "B starts at zero";
  ASSERT_EQ(layer->lora_A->weight.sizes(), (std::vector<int64_t>{2, 6}));
  ASSERT_EQ(layer->lora_B->weight.sizes(), (std::vector<int64_t>{4, 2}));
  {
    torch::NoGradGuard g;
    layer->lora_B->weight.normal_();
  }
  torch::Tensor expect = torch::addmm(layer->bias, x, layer->weight.t()) +
                         3.0 * x.matmul(layer->lora_A->weight.t()).matmul(layer->lora_B->weight.t());
  EXPECT_TRUE(torch::allclose(layer(x), expect, 1e-5, 1e-6));
  std::vector<std::string> names;
  for (const auto& p : layer->named_parameters()) names.push_back(p.key());
  EXPECT_EQ(names, (std::vector<std::string>{"weight", "bias", "lora_A.weight", "lora_B.weight"}));
}

TEST(LoraLinear, Conv1DAdapterUsesInOutLayout) {
  torch::manual_seed(2);
  models::Conv1D conv(6, 9, 0.02);
  LoraOptions o;
  o.r = 3;
  o.alpha = 3;
  conv->AddLora(*conv, o, conv->weight);
  {
    torch::NoGradGuard g;
    conv->lora_B->weight.normal_();
  }
  torch::Tensor x = torch::randn({2, 7, 6});
  torch::Tensor expect =
      x.matmul(conv->weight) + conv->bias + x.matmul(conv->lora_A->weight.t()).matmul(conv->lora_B->weight.t());
  EXPECT_TRUE(torch::allclose(conv(x), expect, 1e-5, 1e-6));
  EXPECT_TRUE(conv->lora_fan_in_fan_out());
}

TEST(LoraLinear, DropoutOnlyInTraining) {
  torch::manual_seed(3);
  LoraLinear layer(8, 8);
  LoraOptions o;
  o.r = 4;
  o.dropout = 0.5;
  layer->AddLora(*layer, o, layer->weight);
  {
    torch::NoGradGuard g;
    layer->lora_B->weight.normal_();
  }
  torch::Tensor x = torch::randn({64, 8});
  layer->eval();
  torch::Tensor a = layer(x), b = layer(x);
  EXPECT_TRUE(torch::equal(a, b));
  layer->train();
  EXPECT_FALSE(torch::equal(layer(x), layer(x)));
}

struct Block : torch::nn::Module {
  Block() {
    q_proj = register_module("q_proj", LoraLinear(4, 4));
    v_proj = register_module("v_proj", LoraLinear(4, 4));
    norm = register_parameter("norm", torch::ones({4}));
  }
  LoraLinear q_proj{nullptr}, v_proj{nullptr};
  torch::Tensor norm;
};

struct Net : torch::nn::Module {
  Net() {
    a = register_module("a", std::make_shared<Block>());
    b = register_module("b", std::make_shared<Block>());
    lm_head = register_module("lm_head", LoraLinear(4, 10));
  }
  std::shared_ptr<Block> a, b;
  LoraLinear lm_head{nullptr};
};

TEST(ApplyLora, AdaptsTargetsAndFreezesTheRest) {
  Net net;
  LoraOptions o;
  o.r = 2;
  o.targets = {"v_proj"};
  absl::StatusOr<LoraSummary> s = ApplyLora(net, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->layers, 2);
  EXPECT_EQ(s->trainable_numel, 2 * (2 * 4 + 4 * 2));
  for (const auto& p : net.named_parameters()) {
    EXPECT_EQ(p.value().requires_grad(), IsLoraParameterName(p.key())) << p.key();
  }
  EXPECT_TRUE(net.a->v_proj->has_lora());
  EXPECT_FALSE(net.a->q_proj->has_lora());

  Net all;
  o.targets = {"all-linear"};
  s = ApplyLora(all, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->layers, 4) << "every LoraLinear but lm_head";
  EXPECT_FALSE(all.lm_head->has_lora());
}

TEST(ApplyLora, RefusesBadOptionsByName) {
  Net net;
  LoraOptions o;
  o.r = 2;
  o.targets = {"k_proj"};
  absl::StatusOr<LoraSummary> s = ApplyLora(net, o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("'k_proj' matches no layer"), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("q_proj"), std::string::npos) << "lists the capable layers";

  o.targets = {"a.q_proj"};
  EXPECT_NE(ValidateLoraOptions(o).message().find("dotted path"), std::string::npos);
  o.targets = {"q_proj"};
  o.alpha = 0;
  EXPECT_NE(ValidateLoraOptions(o).message().find("alpha"), std::string::npos);
  o.alpha = 8;
  o.dropout = 1;
  EXPECT_NE(ValidateLoraOptions(o).message().find("dropout"), std::string::npos);
  o.dropout = 0;
  o.r = -1;
  EXPECT_FALSE(ValidateLoraOptions(o).ok());

  torch::nn::Sequential plain(torch::nn::Linear(3, 3));
  o.r = 2;
  s = ApplyLora(*plain.ptr(), o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("no LoRA-capable layers"), std::string::npos) << s.status();
}

TEST(LoraOptions, ModulesToSaveTrainInFullAndAreNeverTargets) {
  LoraOptions o;
  o.r = 2;
  o.targets = {"all-linear"};
  o.modules_to_save = {"classifier"};
  EXPECT_TRUE(ValidateLoraOptions(o).ok());
  EXPECT_FALSE(IsLoraTarget(o, "classifier"));
  EXPECT_TRUE(IsLoraTarget(o, "dense"));
  EXPECT_TRUE(IsLoraSavedModuleParameter(o, "classifier.weight"));
  EXPECT_TRUE(IsLoraSavedModuleParameter(o, "head.classifier.bias"));
  EXPECT_FALSE(IsLoraSavedModuleParameter(o, "classifier"));  // a parameter named so, not a module
  EXPECT_FALSE(IsLoraSavedModuleParameter(o, "bert.pooler.dense.weight"));
  EXPECT_TRUE(IsLoraTrainable(o, "bert.encoder.layer.0.attention.self.query.lora_A.weight"));
  o.targets = {"query", "classifier"};
  auto st = ValidateLoraOptions(o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("both a target and a module to save"), std::string::npos) << st;
  o.targets = {"query"};
  o.modules_to_save = {"bert.classifier"};
  st = ValidateLoraOptions(o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("own name"), std::string::npos) << st;
  // One that matches nothing is named when the model is built.
  models::ModelSpec spec{"bert-tiny", {}, 1, {}};
  spec.lora.r = 2;
  spec.lora.modules_to_save = {"score"};
  auto m = models::CreateModel(spec);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("module to save 'score' matches no module"), std::string::npos) << m.status();
}

TEST(LoraModels, BuiltinModelsTakeAdaptersOnTheirDefaults) {
  struct Case {
    const char* name;
    std::vector<std::string> targets;  // empty: the default
    int64_t layers;
  };
  // bert-tiny: PEFT's BERT default, query and value of both layers.
  for (const Case& c : {Case{"llama-tiny", {}, 4}, Case{"llama-tiny", {"all-linear"}, 14}, Case{"gpt2-tiny", {}, 2},
                        Case{"bert-tiny", {}, 4}}) {
    models::ModelSpec plain{c.name, {}, 1, {}};
    models::ModelSpec lora = plain;
    lora.lora.r = 4;
    lora.lora.targets = c.targets;
    auto base = models::CreateModel(plain);
    auto adapted = models::CreateModel(lora);
    ASSERT_TRUE(base.ok()) << base.status();
    ASSERT_TRUE(adapted.ok()) << adapted.status();
    const LoraSummary s = SummarizeLora(*(*adapted)->module());
    EXPECT_EQ(s.layers, c.layers) << c.name;
    // BERT's classifier (PEFT's SEQ_CLS modules_to_save) trains in full.
    const bool bert = std::string(c.name) == "bert-tiny";
    const int64_t head = bert ? (*base)->module()->named_parameters()["classifier.weight"].numel() +
                                    (*base)->module()->named_parameters()["classifier.bias"].numel()
                              : 0;
    EXPECT_EQ(s.frozen_numel, (*base)->info().num_params - head) << c.name;
    EXPECT_EQ(s.fan_in_fan_out, std::string(c.name) == "gpt2-tiny");
    // Only the adapters (and BERT's head) train.
    for (const auto& p : (*adapted)->module()->named_parameters()) {
      const bool trained = IsLoraParameterName(p.key()) || (bert && absl::StartsWith(p.key(), "classifier."));
      EXPECT_EQ(p.value().requires_grad(), trained) << c.name << " " << p.key();
    }
    // The base weights are those of the same seed without LoRA.
    auto base_params = (*base)->module()->named_parameters();
    for (const auto& p : (*adapted)->module()->named_parameters()) {
      if (IsLoraParameterName(p.key())) continue;
      ASSERT_TRUE(base_params.contains(p.key())) << p.key();
      EXPECT_TRUE(torch::equal(p.value(), base_params[p.key()])) << c.name << " " << p.key();
    }
    torch::Tensor x = torch::randint((*base)->info().vocab_size, {2, 8}, torch::kLong);
    (*base)->module()->eval();
    (*adapted)->module()->eval();
    EXPECT_TRUE(torch::allclose((*base)->Forward(x), (*adapted)->Forward(x), 1e-6, 1e-6)) << c.name;
  }
  models::ModelSpec bert{"bert-tiny", {}, 1, {}};
  bert.lora.r = 4;
  absl::StatusOr<LoraOptions> resolved = models::ResolveLora(bert);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->targets, (std::vector<std::string>{"query", "value"}));
  models::ModelSpec cnn{"mnist-cnn", {}, 1, {}};
  cnn.lora.r = 4;
  EXPECT_FALSE(models::CreateModel(cnn).ok());
}

}  // namespace
}  // namespace zt
