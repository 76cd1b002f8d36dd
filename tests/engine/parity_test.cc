// Distributed correctness by parity: N ranks training with ZeRO stage k must
// end with the same parameters as one process training the same model on
// the whole global batch with a plain LibTorch optimizer.
//
// Tolerance: CompareWithTruth (parity_model.h, derivation in
// docs/testing.md): a float64 run of the same steps is the truth, and the
// engine may land at most kTruth.multiple times as far from it as the plain
// LibTorch run in the engine's precision (fp32, or a bf16 model with fp32
// master copies) lands, per parameter. Each (stage, world) is a test case
// whose ranks run every variant in turn.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "comm/init.h"
#include "engine/engine.h"
#include "launch/rank_env.h"
#include "tests/engine/parity_model.h"
#include "tests/testing/ranks.h"
#include "util/error.h"
#include "util/status.h"

namespace zt::testing {
namespace {

constexpr int64_t kSteps = 10;

struct Variant {
  std::string name;
  std::function<void(Config&)> setup;
  std::vector<ParamGroupOptions> groups = {};  // EngineOptions::param_groups, mirrored by the reference
  // EngineOptions::bf16_compute. The reference trains while the engine
  // lives, so it computes with the same kernels (engine/bf16_compute.h).
  Bf16Compute bf16_compute = Bf16Compute::kBf16;
  // Hierarchical sharding: mics_shard_size = world / 2 (1 at odd worlds),
  // so two or more replicas of each shard (flat at world 1).
  bool mics = false;
};

// The shard size of a `mics` variant at `world` ranks.
int MicsShardSize(int world) { return world % 2 == 0 ? world / 2 : 1; }

// Optimizer param groups across ParityNet's parameters: the biases without
// decay, fc2's weight with its own decay, eps and betas, fc1's weight in the
// default group (the config's settings). Groups cut across the flat groups
// (bucket 100 elements; stage 3 chunks hold a layer's weight and bias).
std::vector<ParamGroupOptions> ThreeGroups() {
  ParamGroupOptions no_decay;
  no_decay.name = "no_decay";
  no_decay.params = {"fc1.bias", "fc2.bias"};
  no_decay.weight_decay = 0.0;
  ParamGroupOptions head;
  head.name = "head";
  head.params = {"fc2.weight"};
  head.weight_decay = 0.2;
  head.eps = 1e-3;
  head.betas = std::array<double, 2>{0.8, 0.99};
  return {no_decay, head};
}

// See the file comment and docs/testing.md for how these were derived.
constexpr TruthTolerance kTruth{/*multiple=*/4.0, /*floor=*/1e-6};

Config BaseConfig(int stage) {
  Config c = ParityBaseConfig(stage);
  c.zero.reduce_bucket_size = 100;  // several groups: exercises ordering and overlap
  return c;
}

// Setups that variants with and without param groups share.
void LinearWarmup(Config& c) {
  c.scheduler.type = SchedulerType::kWarmupLR;
  c.scheduler.warmup_min_lr = 0.0;
  c.scheduler.warmup_max_lr = 0.02;
  c.scheduler.warmup_num_steps = 5;
  c.scheduler.warmup_type = WarmupType::kLinear;
}

void UseLion(Config& c) {
  c.optimizer.type = OptimizerType::kLion;
  c.optimizer.lr = 1e-3;
  c.optimizer.betas = {0.9, 0.99};
}

std::vector<Variant> Variants() {
  std::vector<Variant> v;
  v.push_back({"adamw", [](Config&) {}});
  v.push_back({"adamw_no_overlap", [](Config& c) { c.zero.overlap_comm = false; }});
  v.push_back({"one_group", [](Config& c) { c.zero.reduce_bucket_size = 1000000; }});
  v.push_back({"micro2_gas4", [](Config& c) {
                 c.batch.train_micro_batch_size_per_gpu = 2;
                 c.batch.gradient_accumulation_steps = 4;
               }});
  v.push_back({"micro8_gas1", [](Config& c) {
                 c.batch.train_micro_batch_size_per_gpu = 8;
                 c.batch.gradient_accumulation_steps = 1;
               }});
  v.push_back({"clipping", [](Config& c) { c.gradient_clipping = 0.05; }});
  v.push_back({"clipping_gas3", [](Config& c) {
                 c.gradient_clipping = 0.05;
                 c.batch.gradient_accumulation_steps = 3;
               }});
  v.push_back({"adam_l2", [](Config& c) {
                 c.optimizer.type = OptimizerType::kAdam;
                 c.optimizer.adam_w_mode = false;
               }});
  v.push_back({"sgd", [](Config& c) {
                 c.optimizer.type = OptimizerType::kSGD;
                 c.optimizer.lr = 0.1;
                 c.optimizer.weight_decay = 0.0;
               }});
  v.push_back({"sgd_nesterov", [](Config& c) {
                 c.optimizer.type = OptimizerType::kSGD;
                 c.optimizer.lr = 0.05;
                 c.optimizer.momentum = 0.9;
                 c.optimizer.nesterov = true;
                 c.optimizer.weight_decay = 1e-3;
               }});
  v.push_back({"adagrad", [](Config& c) {
                 c.optimizer.type = OptimizerType::kAdagrad;
                 c.optimizer.lr = 0.05;
                 c.optimizer.eps = 1e-10;
                 c.optimizer.weight_decay = 1e-3;
               }});
  v.push_back({"lion", UseLion});
  v.push_back({"warmup_lr", LinearWarmup});
  v.push_back({"warmup_decay_lr", [](Config& c) {
                 c.scheduler.type = SchedulerType::kWarmupDecayLR;
                 c.scheduler.warmup_max_lr = 0.02;
                 c.scheduler.warmup_num_steps = 4;
                 c.scheduler.total_num_steps = 10;
               }});
  v.push_back({"warmup_cosine_lr", [](Config& c) {
                 c.scheduler.type = SchedulerType::kWarmupCosineLR;
                 c.scheduler.warmup_num_steps = 3;
                 c.scheduler.total_num_steps = 10;
               }});
  v.push_back({"one_cycle", [](Config& c) {
                 c.scheduler.type = SchedulerType::kOneCycle;
                 c.scheduler.cycle_min_lr = 1e-3;
                 c.scheduler.cycle_max_lr = 2e-2;
                 c.scheduler.cycle_first_step_size = 4;
                 c.scheduler.cycle_second_step_size = 4;
                 c.scheduler.cycle_momentum = true;
                 c.scheduler.cycle_min_mom = 0.85;
                 c.scheduler.cycle_max_mom = 0.95;
               }});
  v.push_back({"lr_range_test", [](Config& c) {
                 c.scheduler.type = SchedulerType::kLRRangeTest;
                 c.scheduler.lr_range_test_min_lr = 1e-3;
                 c.scheduler.lr_range_test_step_size = 2;
                 c.scheduler.lr_range_test_step_rate = 2.0;
               }});
  v.push_back({"param_groups", [](Config&) {}, ThreeGroups()});
  v.push_back({"param_groups_gas2_clip",
               [](Config& c) {
                 c.batch.gradient_accumulation_steps = 2;
                 c.gradient_clipping = 0.05;
               },
               ThreeGroups()});
  {
    // A group's own constant lr (no scheduler).
    std::vector<ParamGroupOptions> g = ThreeGroups();
    g[0].lr = 3e-2;
    v.push_back({"param_groups_lr", [](Config&) {}, g});
  }
  v.push_back({"param_groups_warmup", LinearWarmup, ThreeGroups()});
  v.push_back({"param_groups_sgd",
               [](Config& c) {
                 c.optimizer.type = OptimizerType::kSGD;
                 c.optimizer.lr = 0.05;
                 c.optimizer.momentum = 0.9;
                 c.optimizer.weight_decay = 1e-3;
               },
               ThreeGroups()});
  v.push_back({"param_groups_lion", UseLion, ThreeGroups()});
  v.push_back({"param_groups_bf16",
               [](Config& c) {
                 c.bf16.enabled = true;
                 c.optimizer.lr = 1e-3;
               },
               ThreeGroups()});
  v.push_back({"mics", [](Config&) {}, {}, Bf16Compute::kBf16, /*mics=*/true});
  v.push_back({"mics_clipping_gas3",
               [](Config& c) {
                 c.gradient_clipping = 0.05;
                 c.batch.gradient_accumulation_steps = 3;
               },
               {},
               Bf16Compute::kBf16,
               /*mics=*/true});
  v.push_back({"mics_prescale",
               [](Config& c) { c.prescale_gradients = true; },
               {},
               Bf16Compute::kBf16,
               /*mics=*/true});
  v.push_back({"prescale", [](Config& c) { c.prescale_gradients = true; }});
  v.push_back({"predivide", [](Config& c) { c.gradient_predivide_factor = 2.0; }});
  Variant bf16{"bf16", [](Config& c) {
                 c.bf16.enabled = true;
                 c.optimizer.lr = 1e-3;
               }};
  v.push_back(bf16);
  Variant bf16_fp32_compute = bf16;
  bf16_fp32_compute.name = "bf16_fp32_compute";
  bf16_fp32_compute.bf16_compute = Bf16Compute::kFp32;
  v.push_back(bf16_fp32_compute);
  Variant bf16_fp32_comm = bf16;
  bf16_fp32_comm.name = "bf16_fp32_communication";
  bf16_fp32_comm.setup = [](Config& c) {
    c.bf16.enabled = true;
    c.optimizer.lr = 1e-3;
    c.communication_data_type = DType::kFloat32;
    c.batch.gradient_accumulation_steps = 2;
  };
  v.push_back(bf16_fp32_comm);
  return v;
}

absl::Status RunVariant(const Variant& v, int stage, const std::shared_ptr<comm::ProcessGroup>& pg) {
  const int rank = pg->rank();
  Config config = BaseConfig(stage);
  v.setup(config);
  if (v.mics) config.zero.mics_shard_size = MicsShardSize(pg->size());
  ZT_RETURN_IF_ERROR(ResolveBatch(config.batch, pg->size()));
  const ParityData data = MakeData(kSteps * config.batch.train_batch, 13, 5, 1234);

  // Different initial weights per rank: the engine must broadcast rank 0's.
  torch::manual_seed(99 + static_cast<uint64_t>(rank));
  ParityNet model;
  torch::manual_seed(99);
  ParityNet reference;
  torch::manual_seed(99);
  ParityNet truth;

  EngineOptions engine_options;
  engine_options.param_groups = v.groups;
  engine_options.bf16_compute = v.bf16_compute;
  if (v.mics && stage == 0 && config.zero.mics_shard_size < pg->size()) {
    // Stage 0 shards nothing: the engine refuses, naming the key.
    absl::StatusOr<std::unique_ptr<Engine>> refused = Engine::Create(model, config, pg, engine_options);
    if (refused.ok() || refused.status().message().find("mics_shard_size") == std::string::npos) {
      return absl::InternalError(absl::StrCat(v.name, ": stage 0 with mics_shard_size ", config.zero.mics_shard_size,
                                              " should be refused naming the key, got ",
                                              refused.ok() ? "an engine" : refused.status().ToString()));
    }
    return absl::OkStatus();
  }
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(model, config, pg, engine_options));
  if (engine->param_groups().size() != (v.groups.empty() ? 1 : v.groups.size() + 1)) {
    return absl::InternalError(absl::StrCat(v.name, ": the engine made ", engine->param_groups().size(), " groups"));
  }
  const bool bf16 = config.bf16.enabled;
  for (int64_t s = 0; s < kSteps; ++s) {
    for (int64_t k = 0; k < config.batch.accumulation_steps; ++k) {
      const int64_t start = MicroBatchStart(config.batch, s, k, rank);
      torch::Tensor x = data.x.narrow(0, start, config.batch.micro_batch);
      torch::Tensor y = data.y.narrow(0, start, config.batch.micro_batch);
      if (bf16) x = x.to(torch::kBFloat16);
      torch::Tensor loss = torch::mse_loss(model->forward(x).to(torch::kFloat), y);
      engine->Backward(loss);
      engine->Step();
    }
  }
  if (engine->global_steps() != kSteps || engine->skipped_steps() != 0) {
    return absl::InternalError(absl::StrCat(v.name, ": expected ", kSteps, " steps, got ", engine->global_steps(), " (",
                                            engine->skipped_steps(), " skipped)"));
  }
  if (config.gradient_clipping > 0) {
    if (!engine->last_grad_norm() || *engine->last_grad_norm() <= config.gradient_clipping) {
      return absl::InternalError(absl::StrCat(v.name, ": the test expects clipping to be active"));
    }
  }

  TrainReference(
      *reference, [&](const torch::Tensor& x) { return reference->forward(x); }, data, config, kSteps,
      RefArith::kAsConfigured, v.groups);
  TrainReference(
      *truth, [&](const torch::Tensor& x) { return truth->forward(x); }, data, config, kSteps, RefArith::kFloat64,
      v.groups);
  const std::string where = absl::StrCat("stage ", stage, " world ", pg->size(), " variant ", v.name);
  const TruthComparison cmp = CompareWithTruth(*model, *reference, *truth, kTruth);
  if (rank == 0) RecordTruthStats(where, cmp);
  if (!cmp.failure.empty()) {
    return absl::InternalError(absl::StrCat(where, ": parameters differ from the reference: ", cmp.failure));
  }
  return absl::OkStatus();
}

// ctx.arg: "<stage>:<variants>" ("all" or comma-separated names).
ZT_RANK_WORKER(parity) {
  const std::vector<std::string> parts = absl::StrSplit(ctx.arg, absl::MaxSplits(':', 1));
  if (parts.size() != 2) return absl::InvalidArgumentError(absl::StrCat("expected stage:variants, got ", ctx.arg));
  const int stage = std::stoi(parts[0]);
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  comm::GroupOptions options;
  options.timeout = std::chrono::seconds(60);
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> pg, comm::InitProcessGroup(env, options));
  return RunVariantsInOrder<Variant>(Variants(), parts[1], [&](const Variant& v) { return RunVariant(v, stage, pg); });
}

// One launch per (stage, world) runs every variant (ZT_PARITY_VARIANTS picks
// some); the failure message names each variant that differs. Four ranks on
// two cores cost twice what two do, so world 4 runs the variants that change
// how the partition and the reduction meet: accumulation with clipping,
// bf16 with fp32 communication, and hierarchical sharding (2 shard groups of
// 2, the layout of 2 hosts x 2 ranks); worlds 1-3 run all of them.
struct ParityCase {
  int stage;
  int world;
  std::string variants;  // "all" or comma-separated names
};
void PrintTo(const ParityCase& c, std::ostream* os) {
  *os << "stage " << c.stage << ", world " << c.world << ", variants " << c.variants;
}

class ParityTest : public ::testing::TestWithParam<ParityCase> {};

TEST_P(ParityTest, EveryVariantMatchesSingleProcessReference) {
  const ParityCase& c = GetParam();
  RankRunOptions options;
  options.world_size = c.world;
  options.arg = absl::StrCat(c.stage, ":", ParityVariantsToRun(c.variants));
  options.timeout = ParityLaunchTimeout(Variants().size());
  RankRunResult result = RunRanks("parity", options);
  EXPECT_TRUE(result.ok()) << result.Summary();
}

std::vector<ParityCase> ParityCases() {
  std::vector<ParityCase> cases;
  for (int stage : {0, 1, 2, 3}) {
    for (int world : {1, 2, 3}) cases.push_back({stage, world, "all"});
    cases.push_back({stage, 4, "adamw,clipping_gas3,bf16_fp32_communication,param_groups,mics,mics_clipping_gas3"});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(StagesWorlds, ParityTest, ::testing::ValuesIn(ParityCases()), [](const auto& info) {
  return absl::StrCat("stage", info.param.stage, "_world", info.param.world);
});

}  // namespace
}  // namespace zt::testing

int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }
