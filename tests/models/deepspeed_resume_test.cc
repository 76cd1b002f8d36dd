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

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ckpt/zero_checkpoint.h"
#include "comm/group_options.h"
#include "comm/init.h"
#include "comm/rank_env.h"
#include "engine/engine.h"
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
absl::Status SameTrainable(const ckpt::ZeroCheckpoint& a, const ckpt::ZeroCheckpoint& b, const std::string& what) {
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
  if (compared != 28) return absl::InternalError(absl::StrCat("compared ", compared, " parameters, expected 28"));
  return absl::OkStatus();
}

ZT_RANK_WORKER(resume_from_deepspeed) {
  const auto a = testing::WorkerArgs(ctx.arg);
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  comm::GroupOptions options;
  options.timeout = std::chrono::seconds(60);
  ZT_ASSIGN_OR_RETURN(auto pg, comm::InitProcessGroup(env, options));
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, CreateModel(ModelSpec{"gpt2-tiny", {}, 1}));
  Config c;
  c.batch.train_micro_batch_size_per_gpu = 2;
  c.batch.gradient_accumulation_steps = 1;
  c.steps_per_print = 1000;
  c.optimizer.present = true;
  c.optimizer.type = OptimizerType::kAdamW;
  c.zero.stage = std::stoi(a.at("stage"));
  c.bf16.enabled = a.at("bf16") == "1";
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(model->module(), c, pg));
  ZT_RETURN_IF_ERROR(engine->LoadCheckpoint(a.at("dir")).status());
  if (engine->global_steps() != 4 || engine->global_samples() != 16) {
    return absl::InternalError(absl::StrFormat("loaded step %d, %d samples; DeepSpeed saved step 4, 16 samples",
                                               engine->global_steps(), engine->global_samples()));
  }
  ZT_RETURN_IF_ERROR(engine->SaveCheckpoint(a.at("out"), "resaved"));
  if (pg->rank() != 0) return absl::OkStatus();
  ZT_ASSIGN_OR_RETURN(auto ds, ckpt::ZeroCheckpoint::Open(a.at("dir")));
  ZT_ASSIGN_OR_RETURN(auto ours, ckpt::ZeroCheckpoint::Open(a.at("out")));
  for (const char* what : {"master", "exp_avg", "exp_avg_sq"}) ZT_RETURN_IF_ERROR(SameTrainable(*ds, *ours, what));
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
};

class ResumeFromDeepSpeed : public ::testing::TestWithParam<Case> {};

TEST_P(ResumeFromDeepSpeed, EngineHoldsDeepSpeedsStateAtTwoAndThreeRanks) {
  const Case c = GetParam();
  for (int world : {2, 3}) {
    zt::testing::ScratchDir tmp("zt_dsresume");
    // A copy: loading may tidy the folder (stale temporaries), and the fixtures stay read-only.
    std::filesystem::copy(absl::StrCat(kFixtures, "/", c.fixture), tmp.path() + "/ds",
                          std::filesystem::copy_options::recursive);
    RankRunOptions o;
    o.world_size = world;
    o.timeout = std::chrono::seconds(300);
    o.arg =
        absl::StrCat("stage=", c.stage, ";bf16=", c.bf16 ? 1 : 0, ";dir=", tmp.path(), "/ds;out=", tmp.path(), "/ours");
    RankRunResult r = RunRanks("resume_from_deepspeed", o);
    EXPECT_TRUE(r.ok()) << "world " << world << ": " << r.Summary();
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ResumeFromDeepSpeed,
                         ::testing::Values(Case{"zero1_fp32", 1, false}, Case{"zero2_fp32", 2, false},
                                           Case{"zero2_bf16", 2, true}, Case{"zero3_fp32", 3, false},
                                           Case{"zero3_bf16", 3, true}),
                         [](const auto& info) { return std::string(info.param.fixture); });

}  // namespace
}  // namespace zt::models

int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }
