// Stage-3 parity: N ranks training the GPT-style test model (tied embedding
// and head, a frozen adapter unit, blocks of unequal widths) with ZeRO
// stage 3 must end with the same parameters as one process training it on
// the whole global batch with plain LibTorch.
//
// Tolerance: CompareWithTruth (parity_model.h). A float64 run of the same
// steps is the truth; the engine must land within kTruth.multiple times as
// far from it as the plain LibTorch run in the same precision lands, per
// parameter. A fixed 1e-5 held with OpenBLAS's Haswell kernels and failed
// with its Cooperlake kernels (AVX-512): the float64 runs showed the plain
// fp32 reference itself 1e-5..1e-4 from the truth there, so the engine was
// no further off than LibTorch; docs/testing.md has the figures. bf16 runs
// are held to the same rule against a bf16 reference.
//
// Variants cover prefetch on/off and tight windows, persistence, the top
// module as a unit, one or several chunks per unit, accumulation, clipping,
// overlap off, bf16, a unit order that changes once and one that changes
// every step, evaluation between steps (its losses must match too), and
// GatheredParameters with a modifier rank writing into the shards. Each
// world size is a test case whose ranks run every variant in turn.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/init.h"
#include "engine/engine.h"
#include "engine/gathered_parameters.h"
#include "launch/rank_env.h"
#include "tests/engine/parity_model.h"
#include "tests/engine/stage3_model.h"
#include "tests/testing/ranks.h"
#include "util/error.h"
#include "util/status.h"

namespace zt::testing {
namespace {

constexpr int64_t kSteps = 10;
// See the file comment and docs/testing.md for how these were derived. 8
// here where engine_parity_test keeps 4: with OpenBLAS's generic Prescott
// kernels (what it picks for a CPU it cannot name) the clipping variant at
// world 2 lands 5.2x as far from the truth as the plain reference in one
// tensor (margin 1.14 at 4, 0.61 at 8); every other stage-3 case stays
// below 0.46 at 4, and the unaveraged-gradients mutation fails the same
// cases at 8 as at 4.
constexpr TruthTolerance kTruth{/*multiple=*/8.0, /*floor=*/1e-6};

struct Variant {
  std::string name;
  std::function<void(Config&)> setup = [](Config&) {};
  bool root_unit = false;
  std::function<std::vector<int>(int64_t step)> order;  // blocks to run at a step (null: all, in order)
  bool eval = false;                                    // evaluate after every step
  int64_t modify_step = -1;                             // GatheredParameters(modifier 0) after this step
  bool expect_prefetch = true;
  bool expect_mismatch = false;
};

Config BaseConfig() {
  Config c = ParityBaseConfig(3);
  c.zero.reduce_bucket_size = 200;  // several chunks in the wider blocks
  c.zero.param_persistence_threshold = 0;
  return c;
}

std::vector<Variant> Variants() {
  std::vector<Variant> v;
  v.push_back({"adamw"});
  Variant root{"root_unit"};
  root.root_unit = true;
  v.push_back(root);
  v.push_back({"one_chunk_per_unit", [](Config& c) { c.zero.reduce_bucket_size = 100000; }});
  v.push_back({"persistent_small_params", [](Config& c) { c.zero.param_persistence_threshold = 40; }});
  Variant no_prefetch{"no_prefetch_no_reuse", [](Config& c) {
                        c.zero.prefetch_bucket_size = 0;
                        c.zero.max_reuse_distance = 0;
                      }};
  no_prefetch.expect_prefetch = false;
  no_prefetch.root_unit = true;
  v.push_back(no_prefetch);
  v.push_back({"tight_window", [](Config& c) {
                 c.zero.prefetch_bucket_size = 700;
                 c.zero.max_live_parameters = 1500;
                 c.zero.max_reuse_distance = 300;
               }});
  v.push_back({"micro2_gas4", [](Config& c) { c.batch.gradient_accumulation_steps = 4; }});
  // Clipped hard (0.05), this model's near-zero gradients meet Adam's eps and
  // rounding noise decides the step, at every stage alike; 0.5 still clips.
  v.push_back({"clipping", [](Config& c) { c.gradient_clipping = 0.5; }});
  v.push_back({"no_overlap", [](Config& c) { c.zero.overlap_comm = false; }});
  Variant order_once{"order_changes_once"};
  order_once.order = [](int64_t s) { return s < 5 ? std::vector<int>{0, 1, 2} : std::vector<int>{2, 0, 1}; };
  order_once.expect_mismatch = true;
  v.push_back(order_once);
  Variant order_every{"order_changes_every_step"};
  order_every.order = [](int64_t s) { return s % 2 == 0 ? std::vector<int>{0, 1, 2} : std::vector<int>{1, 2}; };
  order_every.expect_mismatch = true;
  order_every.root_unit = true;
  v.push_back(order_every);
  Variant eval{"eval_between_steps"};
  eval.eval = true;
  v.push_back(eval);
  Variant modify{"gathered_parameters_modifier"};
  modify.modify_step = 4;
  modify.root_unit = true;
  v.push_back(modify);
  Variant bf16{"bf16", [](Config& c) {
                 c.bf16.enabled = true;
                 c.optimizer.lr = 1e-3;
               }};
  v.push_back(bf16);
  return v;
}

torch::Tensor CrossEntropy(const torch::Tensor& logits, const torch::Tensor& y) {
  return torch::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
}

absl::Status RunVariant(const Variant& v, const std::shared_ptr<comm::ProcessGroup>& pg) {
  const int rank = pg->rank();
  Config config = BaseConfig();
  v.setup(config);
  ZT_RETURN_IF_ERROR(ResolveBatch(config.batch, pg->size()));
  const TinyGptOptions opts;
  const ParityData data = MakeTokenData(kSteps * config.batch.train_batch, opts, 1234);
  const ParityData eval_data = MakeTokenData(8, opts, 4321);
  const std::string where = absl::StrFormat("variant %s, world %d", v.name, pg->size());

  // Different initial weights per rank: the engine must broadcast rank 0's.
  torch::manual_seed(99 + static_cast<uint64_t>(rank));
  TinyGptHandle model = MakeTinyGpt(opts, v.root_unit);
  torch::manual_seed(99);
  TinyGpt reference(opts);
  torch::manual_seed(99);
  TinyGpt truth(opts);

  ZT_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(model.module, config, pg));
  std::vector<double> eval_losses;
  for (int64_t s = 0; s < kSteps; ++s) {
    if (v.order) model.impl->order = v.order(s);
    for (int64_t k = 0; k < config.batch.accumulation_steps; ++k) {
      const int64_t start = MicroBatchStart(config.batch, s, k, rank);
      torch::Tensor x = data.x.narrow(0, start, config.batch.micro_batch);
      torch::Tensor y = data.y.narrow(0, start, config.batch.micro_batch);
      engine->Backward(CrossEntropy(model.forward(x), y));
      engine->Step();
    }
    if (v.eval) {
      torch::NoGradGuard no_grad;
      eval_losses.push_back(CrossEntropy(model.forward(eval_data.x), eval_data.y).item<double>());
    }
    if (s == v.modify_step) {
      GatheredParameters full(*engine, *model.impl->ln_f, /*modifier_rank=*/0);
      if (rank == 0) {
        torch::NoGradGuard no_grad;
        model.impl->ln_f->weight.mul_(1.5);
      }
      full.Release();
    }
  }
  const zero::CoordinatorStats stats = *engine->stage3_stats();
  if (engine->global_steps() != kSteps || engine->skipped_steps() != 0) {
    return absl::InternalError(absl::StrCat(where, ": expected ", kSteps, " steps, got ", engine->global_steps()));
  }
  if (config.gradient_clipping > 0 &&
      (!engine->last_grad_norm() || *engine->last_grad_norm() <= config.gradient_clipping)) {
    return absl::InternalError(absl::StrCat(where, ": the test expects clipping to be active"));
  }
  if (stats.gathered_bytes != 0) {
    return absl::InternalError(absl::StrCat(where, ": ", stats.gathered_bytes, " bytes still gathered between steps"));
  }
  if ((stats.prefetched_units > 0) != v.expect_prefetch) {
    return absl::InternalError(absl::StrCat(where, ": ", stats.prefetched_units, " units prefetched"));
  }
  if ((stats.trace_mismatches > 0) != v.expect_mismatch) {
    return absl::InternalError(absl::StrCat(where, ": ", stats.trace_mismatches, " unit-order changes observed"));
  }

  // The same steps twice: in the engine's precision with plain LibTorch, and
  // in float64 (the truth both approximate).
  auto train = [&](TinyGpt& m, RefArith arith) {
    int64_t step = 0;
    std::vector<double> losses;
    TrainReferenceWithLoss(
        *m,
        [&](const torch::Tensor& x, const torch::Tensor& y) {
          if (v.order) m->order = v.order(step);
          ++step;
          return CrossEntropy(m->forward(x), y);
        },
        data, config, kSteps,
        [&](int64_t s) {
          if (v.eval) {
            torch::NoGradGuard no_grad;
            losses.push_back(CrossEntropy(m->forward(eval_data.x), eval_data.y).item<double>());
          }
          if (s == v.modify_step) {
            torch::NoGradGuard no_grad;
            m->ln_f->weight.mul_(1.5);
          }
        },
        arith);
    return losses;
  };
  const std::vector<double> ref_eval = train(reference, RefArith::kAsConfigured);
  const std::vector<double> truth_eval = train(truth, RefArith::kFloat64);
  for (size_t i = 0; i < eval_losses.size(); ++i) {
    const double e = std::abs(eval_losses[i] - truth_eval[i]);
    const double r = std::abs(ref_eval[i] - truth_eval[i]);
    if (e > kTruth.multiple * r + kTruth.floor * std::abs(truth_eval[i])) {
      return absl::InternalError(
          absl::StrFormat("%s: eval loss after step %d is %.9g, float64 truth %.9g, plain "
                          "reference %.9g",
                          where, i, eval_losses[i], truth_eval[i], ref_eval[i]));
    }
  }
  TruthComparison cmp;
  {
    GatheredParameters full(*engine);
    cmp = CompareWithTruth(*model.module, *reference, *truth, kTruth);
    full.Release();
  }
  if (rank == 0) RecordTruthStats(where, cmp);
  if (!cmp.failure.empty()) {
    return absl::InternalError(absl::StrCat(where, ": parameters differ from the reference: ", cmp.failure));
  }
  return absl::OkStatus();
}

// ctx.arg: the variants to run ("all" or comma-separated names).
ZT_RANK_WORKER(stage3_parity) {
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  comm::GroupOptions options;
  options.timeout = std::chrono::seconds(60);
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> pg, comm::InitProcessGroup(env, options));
  return RunVariantsInOrder<Variant>(Variants(), ctx.arg, [&](const Variant& v) { return RunVariant(v, pg); });
}

// One launch per world size runs every variant (ZT_PARITY_VARIANTS picks
// some); the failure message names each variant that differs. Four ranks on
// two cores cost twice what two do, so world 4 runs the variants where the
// number of ranks changes the schedule: a tight prefetch window,
// accumulation, clipping and a modifier rank writing into the shards;
// worlds 1-3 run all of them.
class Stage3ParityTest : public ::testing::TestWithParam<int> {};

TEST_P(Stage3ParityTest, EveryVariantMatchesSingleProcessReference) {
  const int world = GetParam();
  RankRunOptions options;
  options.world_size = world;
  options.arg =
      ParityVariantsToRun(world < 4 ? "all" : "adamw,tight_window,micro2_gas4,clipping,gathered_parameters_modifier");
  options.timeout = ParityLaunchTimeout(Variants().size());
  RankRunResult result = RunRanks("stage3_parity", options);
  EXPECT_TRUE(result.ok()) << result.Summary();
}

INSTANTIATE_TEST_SUITE_P(Worlds, Stage3ParityTest, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return absl::StrCat("world", info.param); });

}  // namespace
}  // namespace zt::testing

int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }
