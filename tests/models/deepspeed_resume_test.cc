// Resuming from DeepSpeed's own checkpoints (tests/fixtures/deepspeed-0.14.5:
// gpt2-tiny with Hugging Face names, trained 4 steps by DeepSpeed 0.14.5 at
// stages 1, 2 and 3 in fp32 and bf16 on 2 ranks). The engine loads each at
// the saving world size and at another one, and what it then holds -- fp32
// master weights, Adam's moments, the optimizer step, the counters -- must
// be DeepSpeed's values exactly: saved again by zerotorch and read back, every
// parameter's master and moments equal DeepSpeed's files bit for bit.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ckpt/zero_checkpoint.h"
#include "comm/group_options.h"
#include "comm/init.h"
#include "engine/engine.h"
#include "engine/weight_decay_groups.h"
#include "launch/rank_env.h"
#include "models/registry.h"
#include "tests/testing/ranks.h"
#include "tests/testing/scratch_dir.h"
#include "tests/testing/worker_args.h"
#include "util/status.h"

namespace zt::models {
namespace {

using testing::RankRunOptions;
using testing::RankRunResult;
using testing::RunRanks;

const std::string kFixtures = std::string(ZT_SOURCE_DIR) + "/tests/fixtures/deepspeed-0.14.5";

// Every trainable parameter's `what` ("master" or a state) in `a` and `b`, bit for bit.
absl::Status SameTrainable(const ckpt::ZeroCheckpoint& a, const ckpt::ZeroCheckpoint& b, const std::string& what,
                           int expected) {
  int compared = 0;
  for (const ckpt::SavedGroup& g : a.layout().groups) {
    for (const ckpt::SavedParam& p : g.params) {
      std::vector<float> x(static_cast<size_t>(p.numel)), y(static_cast<size_t>(p.numel));
      ZT_RETURN_IF_ERROR(a.ReadTrainable(p.name, what, 0, p.numel, x.data()));
      ZT_RETURN_IF_ERROR(b.ReadTrainable(p.name, what, 0, p.numel, y.data()));
      if (std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) != 0) {
        return absl::InternalError(absl::StrCat(what, " of '", p.name, "' differs from DeepSpeed's"));
      }
      ++compared;
    }
  }
  if (compared != expected) {
    return absl::InternalError(absl::StrCat("compared ", compared, " parameters, expected ", expected));
  }
  return absl::OkStatus();
}

// A frozen parameter's value in `a` and `b`, bit for bit: at stage 3 its
// fragments, at stages 1/2 the model states' module entry.
absl::Status SameFrozen(const ckpt::ZeroCheckpoint& a, const ckpt::ZeroCheckpoint& b, const std::string& name) {
  std::vector<std::vector<char>> bytes;
  for (const ckpt::ZeroCheckpoint* c : {&a, &b}) {
    bytes.emplace_back();
    if (const auto where = c->layout().FindFrozen(name)) {
      const ckpt::SavedParam& p = c->layout().frozen[where->first].params[where->second];
      bytes.back().resize(static_cast<size_t>(p.numel) * ckpt::DTypeSize(c->layout().model_dtype));
      ZT_RETURN_IF_ERROR(c->ReadFrozen(name, 0, p.numel, bytes.back().data()));
    } else if (const ckpt::TensorRef* t = c->ModuleTensor(name)) {
      bytes.back().resize(t->nbytes());
      ZT_RETURN_IF_ERROR(c->ReadModuleTensor(*t, bytes.back().data()));
    } else {
      return absl::NotFoundError(absl::StrCat("frozen '", name, "' is in neither the layout nor the module"));
    }
  }
  if (bytes[0] != bytes[1]) return absl::InternalError(absl::StrCat("frozen '", name, "' differs from DeepSpeed's"));
  return absl::OkStatus();
}

ZT_RANK_WORKER(resume_from_deepspeed) {
  const auto a = testing::WorkerArgs(ctx.arg);
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  comm::GroupOptions options;
  options.timeout = std::chrono::seconds(60);
  ZT_ASSIGN_OR_RETURN(auto pg, comm::InitProcessGroup(env, options));
  ModelSpec spec{"gpt2-tiny", {}, 1};
  for (const char* key : {"n_layer", "n_embd", "n_head", "seq_len", "vocab"}) {
    if (a.count(key)) spec.overrides[key] = std::stoll(a.at(key));
  }
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, CreateModel(spec));
  // Frozen as DeepSpeed's run froze it (requires_grad_(False) before initialize).
  const std::string frozen = a.count("frozen") ? a.at("frozen") : "";
  if (!frozen.empty()) {
    bool found = false;
    for (auto& item : model->module()->named_parameters(/*recurse=*/true)) {
      if (item.key() == frozen) {
        item.value().set_requires_grad(false);
        found = true;
      }
    }
    if (!found) return absl::NotFoundError(absl::StrCat("the model has no parameter '", frozen, "'"));
  }
  Config c;
  c.batch.train_micro_batch_size_per_gpu = 2;
  c.batch.gradient_accumulation_steps = 1;
  c.steps_per_print = 1000;
  c.optimizer.present = true;
  c.optimizer.type = OptimizerType::kAdamW;
  c.optimizer.weight_decay = std::stod(a.at("wd"));  // what DeepSpeed's run used
  c.zero.stage = std::stoi(a.at("stage"));
  c.bf16.enabled = a.at("bf16") == "1";
  // groups=hf: the run gives HF Trainer's two param groups itself (what
  // DeepSpeed's run had); else it takes the checkpoint's.
  EngineOptions engine_options;
  if (a.count("groups") && a.at("groups") == "hf") {
    engine_options.param_groups = WeightDecayGroups(*model->module(), c.optimizer.weight_decay);
  }
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(model->module(), c, pg, engine_options));
  const absl::Status loaded = engine->LoadCheckpoint(a.at("dir")).status();
  if (a.count("expect_error")) {
    // Per-group settings the run cannot reproduce: refused, by name.
    if (loaded.ok()) return absl::InternalError("the load succeeded; expected it refused");
    if (!absl::StrContains(loaded.message(), a.at("expect_error"))) {
      return absl::InternalError(
          absl::StrCat("refused with '", loaded.message(), "', expected it to name '", a.at("expect_error"), "'"));
    }
    return absl::OkStatus();
  }
  ZT_RETURN_IF_ERROR(loaded);
  const int64_t steps = std::stoll(a.at("steps")), samples = std::stoll(a.at("samples"));
  if (engine->global_steps() != steps || engine->global_samples() != samples) {
    return absl::InternalError(absl::StrFormat("loaded step %d, %d samples; DeepSpeed saved step %d, %d samples",
                                               engine->global_steps(), engine->global_samples(), steps, samples));
  }
  ZT_RETURN_IF_ERROR(engine->SaveCheckpoint(a.at("out"), "resaved"));
  if (pg->rank() != 0) return absl::OkStatus();
  ZT_ASSIGN_OR_RETURN(auto ds, ckpt::ZeroCheckpoint::Open(a.at("dir")));
  ZT_ASSIGN_OR_RETURN(auto ours, ckpt::ZeroCheckpoint::Open(a.at("out")));
  const int trainable = std::stoi(a.at("trainable"));
  for (const char* what : {"master", "exp_avg", "exp_avg_sq"}) {
    ZT_RETURN_IF_ERROR(SameTrainable(*ds, *ours, what, trainable));
  }
  if (!frozen.empty()) ZT_RETURN_IF_ERROR(SameFrozen(*ds, *ours, frozen));
  // Each group's settings and members as DeepSpeed trained them.
  const auto& want = ds->layout().optimizer_group_settings;
  const auto& got = ours->layout().optimizer_group_settings;
  if (want.size() > 1 || !got.empty()) {
    if (got.size() != want.size() || ours->layout().optimizer_groups != ds->layout().optimizer_groups) {
      return absl::InternalError(absl::StrFormat(
          "resaved with %d param groups, DeepSpeed's file has %d (or other members)", got.size(), want.size()));
    }
    for (size_t g = 0; g < want.size(); ++g) {
      if (got[g].weight_decay != want[g].weight_decay || got[g].eps != want[g].eps || got[g].betas != want[g].betas) {
        return absl::InternalError(absl::StrFormat("param group %d resaved with weight_decay %g, DeepSpeed's %g", g,
                                                   got[g].weight_decay, want[g].weight_decay));
      }
    }
  }
  if (ours->training_state().optimizer_step != ds->training_state().optimizer_step) {
    return absl::InternalError(absl::StrFormat("optimizer step %d after the load, DeepSpeed's %d",
                                               ours->training_state().optimizer_step,
                                               ds->training_state().optimizer_step));
  }
  return absl::OkStatus();
}

struct Case {
  const char* fixture;
  int stage;
  bool bf16;
  // The newer fixtures: the model's dimensions, the frozen parameter, what
  // was saved, and (two param groups) what a refusal must name.
  std::string extra = "";
  double weight_decay = 0.01;  // configs/zero*.json, as DeepSpeed's run had
  int trainable = 28;
  int steps = 4;
  int samples_per_rank_step = 2;  // micro-batch 2
  std::string expect_error = "";
  bool grouped = false;  // two param groups: loaded both with the run's own groups and with the checkpoint's
};

class ResumeFromDeepSpeed : public ::testing::TestWithParam<Case> {};

TEST_P(ResumeFromDeepSpeed, EngineHoldsDeepSpeedsStateAtTwoAndThreeRanks) {
  const Case c = GetParam();
  for (int world : {2, 3}) {
    for (const char* groups : c.grouped ? std::vector<const char*>{"", "hf"} : std::vector<const char*>{""}) {
      zt::testing::ScratchDir tmp("zt_dsresume");
      // A copy: loading may tidy the folder (stale temporaries), and the fixtures stay read-only.
      std::filesystem::copy(absl::StrCat(kFixtures, "/", c.fixture), tmp.path() + "/ds",
                            std::filesystem::copy_options::recursive);
      RankRunOptions o;
      o.world_size = world;
      o.timeout = std::chrono::seconds(300);
      const int saved_world = std::string(c.fixture).find("_w3") != std::string::npos ? 3 : 2;
      o.arg = absl::StrCat("stage=", c.stage, ";bf16=", c.bf16 ? 1 : 0, ";dir=", tmp.path(), "/ds;out=", tmp.path(),
                           "/ours;wd=", c.weight_decay, ";trainable=", c.trainable, ";steps=", c.steps,
                           ";samples=", c.steps * c.samples_per_rank_step * saved_world, c.extra,
                           c.expect_error.empty() ? "" : ";expect_error=" + c.expect_error, ";groups=", groups);
      RankRunResult r = RunRanks("resume_from_deepspeed", o);
      EXPECT_TRUE(r.ok()) << "world " << world << (*groups != '\0' ? " with the run's own groups" : "") << ": "
                          << r.Summary();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, ResumeFromDeepSpeed,
    ::testing::Values(Case{"zero1_fp32", 1, false}, Case{"zero2_fp32", 2, false}, Case{"zero2_bf16", 2, true},
                      Case{"zero3_fp32", 3, false}, Case{"zero3_bf16", 3, true},
                      Case{"zero3_bf16_w2_frozen", 3, true, ";frozen=transformer.wpe.weight", 0.01, 27},
                      // Two param groups (weight decay 0.1 for 2-D weights, 0.0
                      // for biases and LayerNorm weights, HF Trainer's split).
                      Case{"zero2_fp32_w3_padded", 2, false, ";n_layer=2;n_embd=20;n_head=4;seq_len=29;vocab=131", 0.1,
                           28, 5, 2, "", true},
                      Case{"zero1_fp32_w3_frozen_groups", 1, false,
                           ";n_layer=1;n_embd=48;n_head=4;seq_len=37;vocab=113;"
                           "frozen=transformer.wte.weight",
                           0.1, 15, 5, 2, "", true}),
    [](const auto& info) { return std::string(info.param.fixture); });

}  // namespace
}  // namespace zt::models

int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }
