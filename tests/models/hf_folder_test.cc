// Hugging Face model folders: config.json -> the built-in architecture
// (models/catalog/hf_config.h), checked on the published configs of GPT-2,
// TinyLlama-1.1B, Mistral-7B-v0.1, Qwen2-0.5B, Llama-3.2-1B and
// bert-base-uncased (their
// parameter counts must equal the published ones; Llama-3.2's llama3 RoPE
// scaling read and written back; what is not computed is refused by key); and a folder round trip: sharded safetensors
// with an index in, through an engine, and the same tensors out, bit for bit, with a config.json that describes the
// same model (Qwen2, and BERT with its label names).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "ckpt/format/safetensors.h"
#include "comm/single_group.h"
#include "engine/engine.h"
#include "engine/weight_decay_groups.h"
#include "models/catalog/hf_config.h"
#include "models/registry.h"
#include "tests/testing/scratch_dir.h"
#include "tests/testing/test_config.h"

namespace zt::models {
namespace {

namespace fs = std::filesystem;

std::string Folder(const zt::testing::ScratchDir& dir, const std::string& name, const std::string& config) {
  const std::string d = dir.File(name);
  fs::create_directories(d);
  std::ofstream(d + "/config.json") << config;
  return d;
}

// config.json of the models on the Hugging Face hub, as published (trimmed
// of keys nothing reads, such as GPT-2's task_specific_params).
constexpr char kGpt2[] = R"({"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
  "attn_pdrop": 0.1, "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
  "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12,
  "n_positions": 1024, "resid_pdrop": 0.1, "summary_activation": null, "summary_first_dropout": 0.1,
  "summary_proj_to_labels": true, "summary_type": "cls_index", "summary_use_proj": true, "vocab_size": 50257})";
constexpr char kTinyLlama[] = R"({"architectures": ["LlamaForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 5632,
  "max_position_embeddings": 2048, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 22,
  "num_key_value_heads": 4, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.31.0.dev0",
  "use_cache": true, "vocab_size": 32000})";
constexpr char kMistral[] = R"({"architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
  "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 32768, "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0",
  "use_cache": true, "vocab_size": 32000})";
constexpr char kQwen2[] = R"({"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896,
  "initializer_range": 0.02, "intermediate_size": 4864, "max_position_embeddings": 131072,
  "max_window_layers": 24, "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
  "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 131072,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.40.1", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 151936})";
constexpr char kLlama32[] = R"({"architectures": ["LlamaForCausalLM"], "attention_bias": false,
  "attention_dropout": 0.0, "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 131072,
  "mlp_bias": false, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16,
  "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 32.0,
  "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192,
  "rope_type": "llama3"}, "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})";

// bert-base-uncased's, as published (a BertForMaskedLM checkpoint: its
// encoder, with a new 2-label classification head here).
constexpr char kBertBase[] = R"({"architectures": ["BertForMaskedLM"], "attention_probs_dropout_prob": 0.1,
  "gradient_checkpointing": false, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 768,
  "initializer_range": 0.02, "intermediate_size": 3072, "layer_norm_eps": 1e-12, "max_position_embeddings": 512,
  "model_type": "bert", "num_attention_heads": 12, "num_hidden_layers": 12, "pad_token_id": 0,
  "position_embedding_type": "absolute", "transformers_version": "4.6.0.dev0", "type_vocab_size": 2,
  "use_cache": true, "vocab_size": 30522})";

TEST(HfConfig, PublishedModelsHaveTheirPublishedSizes) {
  zt::testing::ScratchDir dir("zt_hf_config");
  struct Known {
    const char* name;
    const char* config;
    int64_t params;   // model.num_parameters() as transformers reports it
    int64_t max_seq;  // what the model accepts
  };
  for (const Known& k : {Known{"gpt2", kGpt2, 124439808, 1024}, Known{"tinyllama", kTinyLlama, 1100048384, 2048},
                         Known{"mistral", kMistral, 7241732096, 4096}, Known{"qwen2", kQwen2, 494032768, 131072},
                         Known{"llama32", kLlama32, 1235814400, 131072},
                         Known{"bert-base-uncased", kBertBase, 109482240 + 768 * 2 + 2, 512}}) {
    SCOPED_TRACE(k.name);
    absl::StatusOr<ModelInfo> info = DescribeModel(ModelSpec{Folder(dir, k.name, k.config), {}, 1});
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->num_params, k.params);
    EXPECT_EQ(info->max_seq_len, k.max_seq);
  }
  // Llama-3.2's rope_scaling (llama3) is read and written back.
  absl::StatusOr<HfArchitecture> a = ArchitectureFromHfConfig(kLlama32, "llama32/config.json");
  ASSERT_TRUE(a.ok()) << a.status();
  const RopeScaling& rs = std::get<LlamaConfig>(*a).rope_scaling;
  EXPECT_EQ(rs.type, RopeScaling::Type::kLlama3);
  EXPECT_EQ(rs.factor, 32.0);
  EXPECT_EQ(rs.original_max_positions, 8192);
  absl::StatusOr<std::string> back = HfConfigJson(ModelSpec{Folder(dir, "llama32b", kLlama32), {}, 1});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(absl::StrContains(
      *back,
      R"("rope_scaling": {"rope_type": "llama3", "factor": 32, "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 8192})"))
      << *back;
}

TEST(HfConfig, WhatIsNotComputedIsNamed) {
  struct Bad {
    std::string config;
    std::string key;
  };
  const std::string llama = R"("model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 128, "max_position_embeddings": 64, "vocab_size": 100)";
  std::vector<Bad> bad = {
      {absl::StrCat("{", llama, R"(, "hidden_act": "gelu"})"), "hidden_act"},
      {absl::StrCat("{", llama, R"(, "attention_bias": true})"), "attention_bias"},
      {absl::StrCat("{", llama, R"(, "mlp_bias": true})"), "mlp_bias"},
      {absl::StrCat("{", llama, R"(, "head_dim": 32})"), "head_dim"},
      {absl::StrCat("{", llama, R"(, "pretraining_tp": 2})"), "pretraining_tp"},
      {absl::StrCat("{", llama, R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})"),
       "rope_scaling: rope_type"},
      {absl::StrCat("{", llama, R"(, "rope_scaling": {"type": "dynamic", "factor": 2.0}})"), "rope_scaling: type"},
      {absl::StrCat("{", llama, R"(, "rope_scaling": {"rope_type": "linear", "factor": 0.5}})"),
       "rope_scaling: factor"},
      {absl::StrCat("{", llama, R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}})"),
       "rope_scaling: original_max_position_embeddings"},
      {R"({"model_type": "llama", "hidden_size": 64})", "num_hidden_layers"},
      {R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "n_positions": 64, "vocab_size": 100,
          "activation_function": "relu"})",
       "activation_function"},
      {R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "n_positions": 64, "vocab_size": 100,
          "scale_attn_by_inverse_layer_idx": true})",
       "scale_attn_by_inverse_layer_idx"},
      {R"({"model_type": "bert", "hidden_size": 64})", "num_hidden_layers"},
      {R"({"model_type": "roberta", "hidden_size": 64})", "model_type"},
      {R"({"hidden_size": 64})", "model_type"},
      {absl::StrCat("{", llama, R"(, "num_hidden_layers": 3})"), "key \"num_hidden_layers\" appears twice"},
      {absl::StrCat("{", llama, R"(, "rms_norm_eps": -1})"), "rms_norm_eps: -1 is not an epsilon"},
      {R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "n_positions": 64, "vocab_size": 100,
          "layer_norm_epsilon": -1})",
       "layer_norm_epsilon: -1 is not an epsilon"},
  };
  const std::string bert = R"("model_type": "bert", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 128, "max_position_embeddings": 64, "vocab_size": 100)";
  for (const auto& [extra, key] : std::vector<std::pair<std::string, std::string>>{
           {R"("hidden_act": "gelu_new")", "hidden_act"},
           {R"("position_embedding_type": "relative_key")", "position_embedding_type"},
           {R"("is_decoder": true)", "is_decoder"},
           {R"("add_cross_attention": true)", "add_cross_attention"},
           {R"("problem_type": "regression")", "problem_type"},
           {R"("problem_type": "multi_label_classification")", "problem_type"},
           {R"("architectures": ["BertForQuestionAnswering"])", "architectures"},
           {R"("architectures": ["BertLMHeadModel"])", "architectures"},
           {R"("hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.2)", "attention_probs_dropout_prob"},
           {R"("classifier_dropout": 1.5)", "classifier_dropout"},
           {R"("num_labels": 1)", "num_labels"},
           {R"("id2label": {"0": "only"})", "id2label"},
           {R"("id2label": {"0": "a", "2": "b"})", "id2label"},
           {R"("id2label": {"0": "a", "1": "b"}, "num_labels": 3)", "num_labels"},
       }) {
    bad.push_back({absl::StrCat("{", bert, ", ", extra, "}"), key});
  }
  for (const Bad& b : bad) {
    absl::StatusOr<HfArchitecture> a = ArchitectureFromHfConfig(b.config, "x/config.json");
    ASSERT_FALSE(a.ok()) << b.config;
    EXPECT_TRUE(absl::StrContains(a.status().message(), "x/config.json: " + b.key)) << a.status();
  }
}

// A Qwen2-shaped folder (tied head, q/k/v biases) in three shards with an
// index: loaded into an engine and exported again, every tensor comes back
// bit for bit, and the exported config.json describes the same model.
TEST(HfFolder, ShardedFolderRoundTripsBitForBit) {
  zt::testing::ScratchDir dir("zt_hf_folder");
  const std::string config = R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 300,
    "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "max_position_embeddings": 64, "hidden_act": "silu", "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "tie_word_embeddings": true, "use_sliding_window": false})";
  const std::string in = Folder(dir, "in", config);
  const ModelSpec spec{in, {}, 1};
  absl::StatusOr<std::unique_ptr<Model>> shape_model = CreateModel(spec);
  ASSERT_TRUE(shape_model.ok()) << shape_model.status();

  // The weights HF would ship: every parameter once (the tied head is not
  // written), random values, in shards of at most 40 KB.
  std::vector<ckpt::SafetensorsEntry> entries;
  std::map<std::string, torch::Tensor> values;
  torch::manual_seed(11);
  for (const auto& item : (*shape_model)->module()->named_parameters()) {
    if (item.key() == "lm_head.weight") continue;
    std::vector<int64_t> shape(item.value().sizes().begin(), item.value().sizes().end());
    entries.push_back({item.key(), ckpt::DType::kFloat32, shape});
    values[item.key()] = torch::randn(item.value().sizes());
  }
  const ckpt::ShardPlan plan = ckpt::PlanShards(entries, 40000);
  ASSERT_GE(plan.shards.size(), 3u);
  for (const auto& shard : plan.shards) {
    auto w = ckpt::SafetensorsWriter::Create(in + "/" + shard.file, shard.entries);
    ASSERT_TRUE(w.ok()) << w.status();
    for (const auto& e : shard.entries) ASSERT_TRUE((*w)->Write(values[e.name].data_ptr(), e.nbytes()).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  ASSERT_TRUE(ckpt::WriteIndex(in, plan).ok());

  absl::StatusOr<std::unique_ptr<Model>> model = CreateModel(spec);
  ASSERT_TRUE(model.ok());
  auto engine =
      Engine::Create((*model)->module(), zt::testing::TestConfig(3, 2, 1), std::make_shared<comm::SingleGroup>());
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_TRUE((*engine)->LoadWeights(in).ok());
  const std::string out = dir.File("out/model.safetensors");
  ASSERT_TRUE((*engine)->ExportWeights(out).ok());
  auto reader = ckpt::SafetensorsReader::Open(out);
  ASSERT_TRUE(reader.ok()) << reader.status();
  for (const auto& [name, want] : values) {
    const ckpt::SafetensorsReader::Tensor* t = (*reader)->Find(name);
    ASSERT_NE(t, nullptr) << name << " was not exported";
    ASSERT_EQ(t->nbytes, want.nbytes()) << name;
    std::vector<char> got(t->nbytes);
    ASSERT_TRUE((*reader)->Read(*t, got.data()).ok());
    EXPECT_EQ(std::memcmp(got.data(), want.data_ptr(), got.size()), 0) << name << " differs";
  }

  // config.json out (what `zt train` writes beside an export) reads back as the same architecture.
  absl::StatusOr<std::string> written = HfConfigJson(spec);
  ASSERT_TRUE(written.ok());
  absl::StatusOr<HfArchitecture> again = ArchitectureFromHfConfig(*written, "exported config.json");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << *written;
  const LlamaConfig& c = std::get<LlamaConfig>(*again);
  EXPECT_EQ(c.model_type, "qwen2");
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.n_kv_head, 2);
  EXPECT_TRUE(absl::StrContains(*written, "\"Qwen2ForCausalLM\"")) << *written;
}

// A fine-tuned BertForSequenceClassification folder (three named labels):
// read with its labels, its weights loaded into a stage-3 engine and exported
// bit for bit, and the exported config.json names the same labels.
TEST(HfFolder, BertFolderRoundTripsWithItsLabels) {
  zt::testing::ScratchDir dir("zt_hf_bert");
  const std::string config = R"({"architectures": ["BertForSequenceClassification"], "model_type": "bert",
    "vocab_size": 120, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 64, "max_position_embeddings": 40, "type_vocab_size": 2, "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "classifier_dropout": null,
    "layer_norm_eps": 1e-12, "pad_token_id": 0, "position_embedding_type": "absolute",
    "problem_type": "single_label_classification",
    "id2label": {"0": "negative", "1": "neutral", "2": "positive"},
    "label2id": {"negative": 0, "neutral": 1, "positive": 2}})";
  const std::string in = Folder(dir, "in", config);
  const ModelSpec spec{in, {}, 1};
  absl::StatusOr<ModelInfo> info = DescribeModel(spec);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->task, Task::kSequenceClassification);
  EXPECT_EQ(info->num_classes, 3);
  EXPECT_EQ(info->max_seq_len, 40);
  absl::StatusOr<HfArchitecture> a = ArchitectureFromHfConfig(config, "in/config.json");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(std::get<BertConfig>(*a).labels, (std::vector<std::string>{"negative", "neutral", "positive"}));
  EXPECT_EQ(std::get<BertConfig>(*a).dropout_percent, 10);

  absl::StatusOr<std::unique_ptr<Model>> model = CreateModel(spec);
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<ckpt::SafetensorsEntry> entries;
  std::map<std::string, torch::Tensor> values;
  torch::manual_seed(12);
  for (const auto& item : (*model)->module()->named_parameters()) {
    std::vector<int64_t> shape(item.value().sizes().begin(), item.value().sizes().end());
    entries.push_back({item.key(), ckpt::DType::kFloat32, shape});
    values[item.key()] = torch::randn(item.value().sizes());
  }
  {
    auto w = ckpt::SafetensorsWriter::Create(in + "/model.safetensors", entries);
    ASSERT_TRUE(w.ok()) << w.status();
    for (const auto& e : entries) ASSERT_TRUE((*w)->Write(values[e.name].data_ptr(), e.nbytes()).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  auto engine =
      Engine::Create((*model)->module(), zt::testing::TestConfig(3, 2, 1), std::make_shared<comm::SingleGroup>());
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_TRUE((*engine)->LoadWeights(in).ok());
  const std::string out = dir.File("out/model.safetensors");
  ASSERT_TRUE((*engine)->ExportWeights(out).ok());
  auto reader = ckpt::SafetensorsReader::Open(out);
  ASSERT_TRUE(reader.ok()) << reader.status();
  for (const auto& [name, want] : values) {
    const ckpt::SafetensorsReader::Tensor* t = (*reader)->Find(name);
    ASSERT_NE(t, nullptr) << name << " was not exported";
    ASSERT_EQ(t->nbytes, want.nbytes()) << name;
    std::vector<char> got(t->nbytes);
    ASSERT_TRUE((*reader)->Read(*t, got.data()).ok());
    EXPECT_EQ(std::memcmp(got.data(), want.data_ptr(), got.size()), 0) << name << " differs";
  }

  absl::StatusOr<std::string> written = HfConfigJson(spec);
  ASSERT_TRUE(written.ok());
  absl::StatusOr<HfArchitecture> again = ArchitectureFromHfConfig(*written, "exported config.json");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << *written;
  const BertConfig& c = std::get<BertConfig>(*again);
  EXPECT_EQ(c.labels, (std::vector<std::string>{"negative", "neutral", "positive"}));
  EXPECT_EQ(c.n_embd, 32);
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.intermediate, 64);
  EXPECT_EQ(c.max_positions, 40);
  EXPECT_EQ(c.vocab_size, 120);
  EXPECT_EQ(c.dropout_percent, 10);
  EXPECT_LT(c.classifier_dropout, 0) << "null stays null";
  EXPECT_TRUE(absl::StrContains(*written, R"("label2id": {
    "negative": 0,)"))
      << *written;
  // A new label count makes a new head: the names give way to LABEL_i.
  absl::StatusOr<std::string> relabeled = HfConfigJson(ModelSpec{in, {{"num_labels", 2}}, 1});
  ASSERT_TRUE(relabeled.ok()) << relabeled.status();
  EXPECT_TRUE(absl::StrContains(*relabeled, R"("1": "LABEL_1")")) << *relabeled;
}

// HF Trainer's decay / no-decay split on the built-in models, by their
// Hugging Face names: every bias and norm weight without decay, every other
// weight (embeddings and a tied head included) with it.
TEST(WeightDecayGroups, SplitTheBuiltInModelsAsTrainerDoes) {
  for (const char* name : {"gpt2-tiny", "llama-mini", "bert-tiny"}) {
    SCOPED_TRACE(name);
    auto model = CreateModel({name, {}, 1, {}});
    ASSERT_TRUE(model.ok()) << model.status();
    const std::vector<ParamGroupOptions> groups = WeightDecayGroups(*(*model)->module(), 0.1);
    ASSERT_EQ(groups.size(), 2u);
    EXPECT_EQ(groups[0].name, "decay");
    EXPECT_EQ(groups[0].weight_decay, 0.1);
    EXPECT_EQ(groups[1].name, "no_decay");
    EXPECT_EQ(groups[1].weight_decay, 0.0);
    size_t trainable = 0;
    std::set<const void*> seen;
    for (const auto& p : (*model)->module()->named_parameters()) {
      if (seen.insert(p.value().unsafeGetTensorImpl()).second) ++trainable;
    }
    EXPECT_EQ(groups[0].params.size() + groups[1].params.size(), trainable);
    for (const std::string& n : groups[1].params) {
      EXPECT_TRUE(absl::StrContains(n, "bias") || absl::StrContains(n, "ln_") || absl::StrContains(n, "norm") ||
                  absl::StrContains(n, "LayerNorm"))
          << n;
    }
    for (const std::string& n : groups[0].params) {
      EXPECT_TRUE(absl::EndsWith(n, "weight")) << n;
      EXPECT_FALSE(absl::StrContains(n, "ln_") || absl::StrContains(n, "norm") || absl::StrContains(n, "LayerNorm"))
          << n;
    }
  }
  // The name patterns alone (models whose norms are modules of their own).
  EXPECT_TRUE(NoDecayByName("model.norm.weight"));
  EXPECT_TRUE(NoDecayByName("encoder.final_norm.weight"));
  EXPECT_TRUE(NoDecayByName("blocks.0.attn.bias"));
  EXPECT_TRUE(NoDecayByName("layers.3.RMSNorm.weight"));
  EXPECT_FALSE(NoDecayByName("model.normalizer.weight"));
  EXPECT_FALSE(NoDecayByName("model.layers.0.mlp.up_proj.weight"));
}

}  // namespace
}  // namespace zt::models
