// Interop with Hugging Face's layout: runs gpt2-tiny, llama-tiny and
// bert-tiny, saves their weights (by our names), input and logits as raw
// tensors (BERT: also the attention mask, with padding, and our exported
// config.json, which sizes the reference), and has
// tests/models/hf_reference.py (the HF modeling code's math, HF module names)
// load the weights with strict load_state_dict and recompute the logits.
// Skipped when no python3 with torch is found (ZT_PYTHON names one).
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "absl/strings/str_cat.h"
#include "models/registry.h"
#include "tests/testing/python_reference.h"

namespace zt::models {
namespace {

namespace fs = std::filesystem;

using zt::testing::PythonWithTorch;
using Dump = zt::testing::ReferenceDump;

// Dumps the model's weights, an input and its logits into `dir`, for
// hf_reference.py to rebuild the HF model from `dims` and compare.
void DumpForReference(const ModelSpec& spec, const std::string& family, const std::map<std::string, std::string>& dims,
                      const fs::path& dir) {
  absl::StatusOr<std::unique_ptr<Model>> model = CreateModel(spec);
  ASSERT_TRUE(model.ok()) << model.status();
  torch::nn::Module& module = *(*model)->module();
  torch::manual_seed(3);
  {  // perturb norms and biases away from their 1/0 init so each one matters
    torch::NoGradGuard no_grad;
    for (auto& p : module.parameters()) p.add_(torch::randn_like(p) * 0.05);
  }
  fs::create_directories(dir);
  Dump dump(dir);
  dump.Config("family", family);
  absl::StatusOr<ModelInfo> info = DescribeModel(spec);
  ASSERT_TRUE(info.ok());
  for (const auto& [key, value] : dims) dump.Config(key, value);
  dump.Config("vocab", std::to_string(info->vocab_size));
  dump.Config("n_positions", std::to_string(info->max_seq_len));
  // Every name, a tied lm_head.weight included (strict loading wants both).
  for (const auto& item : module.named_parameters()) dump.Tensor(item.key(), item.value());
  torch::Tensor ids = torch::randint(info->vocab_size, {2, 24}, torch::kLong);
  torch::NoGradGuard no_grad;
  (*model)->module()->eval();
  dump.Tensor("input", ids);
  if (info->task == Task::kSequenceClassification) {
    // Row 0 padded after 15 tokens, row 1 after 9 (junk ids under mask 0).
    torch::Tensor mask = torch::ones({2, 24}, torch::kLong);
    mask.index_put_({0, torch::indexing::Slice(15, 24)}, 0);
    mask.index_put_({1, torch::indexing::Slice(9, 24)}, 0);
    dump.Tensor("attention_mask", mask);
    dump.Tensor("logits", (*model)->ForwardMasked(ids, mask));
    absl::StatusOr<std::string> config = HfConfigJson(spec);
    ASSERT_TRUE(config.ok()) << config.status();
    std::ofstream(dir / "config.json") << *config;
  } else {
    dump.Tensor("logits", (*model)->Forward(ids));
  }
}

// One hf_reference.py process checks every dumped folder (importing torch
// is most of its run time); it prints one line per folder.
void CheckAgainstReference(const std::vector<fs::path>& dirs) {
  const std::string py = PythonWithTorch();
  std::string output;
  int rc = 0;
  std::string cmd = py + " " + ZT_SOURCE_DIR + "/tests/models/hf_reference.py";
  for (const fs::path& dir : dirs) cmd += " " + dir.string();
  if (!py.empty()) rc = zt::testing::RunCommand(cmd, &output);
  for (const fs::path& dir : dirs) fs::remove_all(dir);
  if (py.empty()) GTEST_SKIP() << "no python3 with torch (set ZT_PYTHON)";
  EXPECT_EQ(rc, 0) << cmd << "\n" << output;
  std::cout << output;
}

fs::path ScratchFor(const std::string& what) {
  return fs::temp_directory_path() / ("zt_hf_interop_" + std::to_string(::getpid()) + "_" + what);
}

struct Case {
  ModelSpec spec;
  std::string family;
};

TEST(HuggingFaceInterop, LogitsMatchReferenceModelLoadedFromOurWeights) {
  std::vector<fs::path> dirs;
  for (const Case& c : std::vector<Case>{{{"gpt2-tiny", {{"n_layer", 2}}, 1}, "gpt2"},
                                         {{"llama-tiny", {{"n_layer", 2}}, 1}, "llama"},
                                         {{"llama-tiny", {{"n_layer", 1}, {"n_kv_head", 1}}, 2}, "llama"}}) {
    SCOPED_TRACE(c.spec.name);
    // The tiny presets' dims, then the case's overrides (the script takes these keys).
    std::map<std::string, std::string> dims = {{"n_layer", "2"},   {"n_embd", "64"},        {"n_head", "4"},
                                               {"n_kv_head", "2"}, {"intermediate", "172"}, {"rms_norm_eps", "1e-05"}};
    for (const auto& [key, value] : c.spec.overrides) dims[key] = std::to_string(value);
    dirs.push_back(ScratchFor(absl::StrCat(c.family, "_", dirs.size())));
    DumpForReference(c.spec, c.family, dims, dirs.back());
  }
  CheckAgainstReference(dirs);
}

// BertForSequenceClassification with an attention mask that pads both rows,
// three labels and bert-tiny's dimensions but a smaller vocab.
TEST(HuggingFaceInterop, BertLogitsWithPaddingMatchReference) {
  const fs::path dir = ScratchFor("bert");
  DumpForReference({"bert-tiny", {{"vocab", 1000}, {"num_labels", 3}}, 1}, "bert", {}, dir);
  CheckAgainstReference({dir});
}

// Models built from a Hugging Face folder's config.json (models/catalog/hf_config.h):
// Qwen2 (q/k/v biases, tied head, rope_theta 1e6, eps 1e-6), Mistral
// (grouped-query attention, untied head, a window longer than its context),
// and LLaMA with rope_scaling llama3 (Llama-3.1/3.2) and linear.
TEST(HuggingFaceInterop, FolderModelsMatchTheReference) {
  struct FolderCase {
    std::string family;
    std::string config;
    std::map<std::string, std::string> dims;
  };
  const std::vector<FolderCase> cases = {
      {"qwen2",
       R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 300, "hidden_size": 64,
           "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "max_position_embeddings": 64, "hidden_act": "silu", "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
           "tie_word_embeddings": true, "use_sliding_window": false, "sliding_window": 32, "torch_dtype": "bfloat16"})",
       {{"n_layer", "2"},
        {"n_embd", "64"},
        {"n_head", "4"},
        {"n_kv_head", "2"},
        {"intermediate", "96"},
        {"rms_norm_eps", "1e-06"},
        {"rope_theta", "1000000.0"},
        {"qkv_bias", "1"},
        {"tie", "1"}}},
      {"mistral",
       R"({"architectures": ["MistralForCausalLM"], "model_type": "mistral", "vocab_size": 320, "hidden_size": 64,
           "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
           "max_position_embeddings": 64, "hidden_act": "silu", "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
           "sliding_window": 4096, "tie_word_embeddings": false})",
       {{"n_layer", "2"},
        {"n_embd", "64"},
        {"n_head", "8"},
        {"n_kv_head", "2"},
        {"intermediate", "128"},
        {"rms_norm_eps", "1e-05"},
        {"rope_theta", "10000.0"}}},
      // Llama-3.1/3.2's RoPE scaling, with an original context of 16 so the
      // 24 positions span its low, blended and high frequencies.
      {"llama3",
       R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 300, "hidden_size": 64,
           "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 1,
           "head_dim": 16, "max_position_embeddings": 64, "hidden_act": "silu", "rms_norm_eps": 1e-05,
           "rope_theta": 500000.0, "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
           "original_max_position_embeddings": 16, "rope_type": "llama3"}, "tie_word_embeddings": true})",
       {{"n_layer", "2"},
        {"n_embd", "64"},
        {"n_head", "4"},
        {"n_kv_head", "1"},
        {"intermediate", "96"},
        {"rms_norm_eps", "1e-05"},
        {"rope_theta", "500000.0"},
        {"tie", "1"},
        {"rope_type", "llama3"},
        {"rope_factor", "32.0"},
        {"rope_low", "1.0"},
        {"rope_high", "4.0"},
        {"rope_orig", "16"}}},
      {"linear",
       R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 300, "hidden_size": 64,
           "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "max_position_embeddings": 64, "hidden_act": "silu", "rms_norm_eps": 1e-05,
           "rope_scaling": {"type": "linear", "factor": 4.0}, "tie_word_embeddings": false})",
       {{"n_layer", "2"},
        {"n_embd", "64"},
        {"n_head", "4"},
        {"n_kv_head", "2"},
        {"intermediate", "96"},
        {"rms_norm_eps", "1e-05"},
        {"rope_type", "linear"},
        {"rope_factor", "4.0"}}},
  };
  std::vector<fs::path> dumps;
  for (const FolderCase& c : cases) {
    SCOPED_TRACE(c.family);
    const fs::path dir = fs::temp_directory_path() / ("zt_hf_folder_" + std::to_string(::getpid()) + "_" + c.family);
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << c.config;
    dumps.push_back(ScratchFor(c.family));
    DumpForReference(ModelSpec{dir.string(), {}, 1}, "llama", c.dims, dumps.back());
    fs::remove_all(dir);
  }
  CheckAgainstReference(dumps);
}

}  // namespace
}  // namespace zt::models
