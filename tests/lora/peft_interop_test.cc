// zerotorch's LoRA exports against PEFT's documented format, checked by an
// independent implementation (peft_reference.py on Debian's python3-torch,
// with the GPT-2 / LLaMA reference models of tests/models/hf_reference.py):
// a LoRA model with non-zero adapters is saved by a real engine, its adapter
// exported as PEFT's adapter_model.safetensors + adapter_config.json and its
// merged weights as safetensors; the reference applies the adapter to the
// base weights the way PEFT does and must reproduce our logits, and the
// merged file alone must too. Skipped when no python3 with torch is found
// (ZT_PYTHON names one).
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ckpt/export.h"
#include "ckpt/lora_record.h"
#include "ckpt/zero_checkpoint.h"
#include "comm/init.h"
#include "engine/engine.h"
#include "launch/rank_env.h"
#include "lora/apply_lora.h"
#include "models/registry.h"
#include "tests/testing/python_reference.h"
#include "tests/testing/ranks.h"
#include "tests/testing/test_config.h"
#include "util/status.h"

namespace zt {
namespace {

namespace fs = std::filesystem;

using Dump = zt::testing::ReferenceDump;
using zt::testing::PythonWithTorch;

struct Case {
  std::string model, family;
  std::vector<std::string> targets;
  std::map<std::string, std::string> dims;  // what hf_reference.py builds from
};

const std::vector<Case>& Cases() {
  // llama-tiny's dimensions, as hf_reference.py takes them.
  const std::map<std::string, std::string> llama = {{"n_layer", "2"},        {"n_embd", "64"},
                                                    {"n_head", "4"},         {"n_kv_head", "2"},
                                                    {"intermediate", "172"}, {"rms_norm_eps", "1e-05"}};
  static const std::vector<Case> cases = {
      {"gpt2-tiny", "gpt2", {}, {{"n_layer", "2"}, {"n_embd", "64"}, {"n_head", "4"}}},
      {"llama-tiny", "llama", {"all-linear"}, llama},
      {"llama-tiny", "llama", {"q_proj", "v_proj", "down_proj"}, llama},
  };
  return cases;
}

// Rank program (world 1): builds, saves and exports case `ctx.arg` into
// DIR = $ZT_PEFT_DIR.
ZT_RANK_WORKER(peft_export) {
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  ZT_ASSIGN_OR_RETURN(auto pg, comm::InitProcessGroup(env, {}));
  const Case& c = Cases()[static_cast<size_t>(std::stoi(ctx.arg))];
  const fs::path dir = std::getenv("ZT_PEFT_DIR");
  models::ModelSpec spec{c.model, {}, 1, {}};
  spec.lora.r = 4;
  spec.lora.alpha = 12;
  spec.lora.targets = c.targets;
  ZT_ASSIGN_OR_RETURN(auto model, models::CreateModel(spec));
  ZT_ASSIGN_OR_RETURN(const LoraOptions resolved, models::ResolveLora(spec));
  torch::manual_seed(3);
  {  // adapters that change the output, norms and biases away from 1/0
    torch::NoGradGuard no_grad;
    for (auto& p : model->module()->named_parameters()) {
      p.value().add_(torch::randn_like(p.value()) * (IsLoraParameterName(p.key()) ? 0.3 : 0.05));
    }
  }
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(model->module(), testing::TestConfig(0, 1, 1), pg));
  ZT_RETURN_IF_ERROR(engine->SaveCheckpoint((dir / "ck").string()));
  ZT_ASSIGN_OR_RETURN(auto ck, ckpt::ZeroCheckpoint::Open((dir / "ck").string()));
  const LoraRecord record{resolved, SummarizeLora(*model->module()).fan_in_fan_out};
  ckpt::ExportOptions adapter;
  adapter.lora = ckpt::LoraExport::kAdapterOnly;
  fs::create_directories(dir / "adapter");
  ZT_RETURN_IF_ERROR(
      ckpt::ExportSafetensors(*ck, (dir / "adapter" / "adapter_model.safetensors").string(), adapter).status());
  ZT_RETURN_IF_ERROR(WritePeftAdapterConfig((dir / "adapter").string(), record, ""));
  ckpt::ExportOptions merged;
  merged.lora = ckpt::LoraExport::kMerged;
  merged.lora_scaling = record.options.scaling();
  merged.lora_fan_in_fan_out = record.fan_in_fan_out;
  ZT_RETURN_IF_ERROR(ckpt::ExportSafetensors(*ck, (dir / "merged.safetensors").string(), merged).status());

  Dump dump(dir);
  dump.Config("family", c.family);
  for (const auto& [k, v] : c.dims) dump.Config(k, v);
  dump.Config("vocab", std::to_string(model->info().vocab_size));
  dump.Config("n_positions", std::to_string(model->info().max_seq_len));
  for (const auto& p : model->module()->named_parameters()) {
    if (!IsLoraParameterName(p.key())) dump.Tensor(p.key(), p.value());
  }
  torch::Tensor ids = torch::randint(model->info().vocab_size, {2, 24}, torch::kLong);
  model->module()->eval();
  torch::NoGradGuard no_grad;
  dump.Tensor("input", ids);
  dump.Tensor("logits", model->Forward(ids));
  return absl::OkStatus();
}

TEST(PeftInterop, ReferenceAppliesOurAdapterAndMergedWeightsAsPeftDoes) {
  const std::string py = PythonWithTorch();
  if (py.empty()) GTEST_SKIP() << "no python3 with torch (set ZT_PYTHON)";
  const std::string script = std::string(ZT_SOURCE_DIR) + "/tests/lora/peft_reference.py";
  for (size_t i = 0; i < Cases().size(); ++i) {
    SCOPED_TRACE(Cases()[i].model);
    const fs::path dir = fs::temp_directory_path() / absl::StrCat("zt_peft_", ::getpid(), "_", i);
    fs::create_directories(dir);
    ::setenv("ZT_PEFT_DIR", dir.c_str(), 1);
    testing::RankRunOptions o;
    o.world_size = 1;
    o.arg = std::to_string(i);
    testing::RankRunResult r = testing::RunRanks("peft_export", o);
    ASSERT_TRUE(r.ok()) << r.Summary();
    const std::string cmd = py + " " + script + " " + dir.string();
    std::string output;
    EXPECT_EQ(zt::testing::RunCommand(cmd, &output), 0) << cmd << "\n" << output;
    std::printf("%s", output.c_str());
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace zt

int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }
