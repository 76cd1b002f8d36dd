// fp16 loss scaling across ranks. One rank injects inf (or nan) into the
// gradient of a single element; whichever rank owns that element after the
// reduction, every rank must skip the same step, keep its parameters, halve
// the scale, and later grow it back after loss_scale_window clean steps.
// Overflowing at the minimum scale must stop every rank with a clear error.
// (LibTorch 1.13 has no fp16 matmul on CPU, so the model is elementwise.)
// At stage 3 the model is a zt::Unit, so its parameters are really sharded.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "comm/init.h"
#include "engine/engine.h"
#include "engine/gathered_parameters.h"
#include "launch/rank_env.h"
#include "tests/engine/parity_model.h"
#include "tests/testing/ranks.h"
#include "tests/testing/test_config.h"
#include "util/error.h"
#include "util/status.h"
#include "zero/unit.h"

namespace zt::testing {
namespace {

Config Fp16Config(int stage, int initial_power) {
  Config c = TestConfig(stage, /*micro_batch=*/2, /*accumulation=*/1, OptimizerType::kSGD, 0.05);
  c.zero.reduce_bucket_size = 8;           // w and b in separate groups (chunks at stage 3)
  c.zero.param_persistence_threshold = 0;  // stage 3: shard even these tiny tensors
  c.fp16.enabled = true;
  c.fp16.initial_scale_power = initial_power;
  c.fp16.loss_scale_window = 3;
  c.fp16.hysteresis = 1;
  c.fp16.min_loss_scale = 1;
  return c;
}

// ScaleShift whose forward also returns w[0] * inject, so one rank can make
// exactly that gradient non-finite while the unit's parameters are sharded.
struct InjectableImpl : ScaleShiftImpl {
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x, const torch::Tensor& inject) {
    return {ScaleShiftImpl::forward(x), (w.narrow(0, 0, 1) * inject).to(torch::kFloat).sum()};
  }
};

// A copy of the full parameters (gathered at stage 3: collective).
torch::Tensor FlatParams(torch::nn::Module& m, Engine& engine) {
  GatheredParameters full(engine);
  std::vector<torch::Tensor> parts;
  for (auto& p : m.parameters()) parts.push_back(p.detach().to(torch::kFloat).flatten());
  torch::Tensor flat = torch::cat(parts);
  full.Release();
  return flat;
}

// Parameters must be bit-identical on every rank.
absl::Status CheckRanksAgree(const torch::Tensor& params, comm::ProcessGroup& pg) {
  torch::Tensor hi = params.clone(), lo = params.clone();
  ZT_RETURN_IF_ERROR(pg.AllReduce(hi, comm::ReduceOp::kMax)->Wait());
  ZT_RETURN_IF_ERROR(pg.AllReduce(lo, comm::ReduceOp::kMin)->Wait());
  if (!torch::equal(hi, lo)) return absl::InternalError("ranks hold different parameters");
  return absl::OkStatus();
}

ZT_RANK_WORKER(fp16) {
  std::vector<std::string> args = absl::StrSplit(ctx.arg, ',');
  const int stage = std::stoi(args.at(0));
  const std::string mode = args.at(1);  // inf | nan | min_scale
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  comm::GroupOptions go;
  go.timeout = std::chrono::seconds(60);
  ZT_ASSIGN_OR_RETURN(auto pg, comm::InitProcessGroup(env, go));
  const int injector = pg->size() - 1;

  const bool min_scale = mode == "min_scale";
  Config c = Fp16Config(stage, min_scale ? 0 : 8);
  ZT_RETURN_IF_ERROR(ResolveBatch(c.batch, pg->size()));
  torch::manual_seed(1);
  zt::Unit<InjectableImpl> model;
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(model, c, pg));
  const ParityData data = MakeData(8 * c.batch.train_batch, 13, 13, 77);
  const float bad = mode == "nan" ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  const int inject_step = min_scale ? 1 : 2;

  for (int64_t step = 0; step < 8; ++step) {
    const int64_t start = MicroBatchStart(c.batch, step, 0, pg->rank());
    torch::Tensor x = data.x.narrow(0, start, 2).to(torch::kHalf);
    torch::Tensor y = data.y.narrow(0, start, 2);
    // Only w[0]'s gradient becomes non-finite, on one rank.
    const bool inject = step == inject_step && pg->rank() == injector;
    auto [out, extra] = model(x, torch::full({1}, inject ? bad : 0.0f, torch::kHalf));
    torch::Tensor loss = (out.to(torch::kFloat) - y).pow(2).mean() + extra;
    const torch::Tensor before = FlatParams(*model, *engine);
    const double scale_before = engine->loss_scale();
    try {
      engine->Backward(loss);
      engine->Step();
    } catch (const Error& e) {
      if (min_scale && step == inject_step && std::string(e.what()).find("minimum loss scale") != std::string::npos) {
        return absl::OkStatus();  // the expected, clearly worded stop
      }
      return absl::InternalError(absl::StrCat("step ", step, " threw: ", e.what()));
    }
    if (step == inject_step) {
      if (min_scale) return absl::InternalError("overflow at the minimum scale did not stop training");
      if (engine->skipped_steps() != 1) return absl::InternalError("the overflow step was not skipped");
      if (!torch::equal(FlatParams(*model, *engine), before)) {
        return absl::InternalError("parameters changed on a skipped step");
      }
      if (engine->loss_scale() != scale_before / 2) {
        return absl::InternalError(
            absl::StrCat("scale ", engine->loss_scale(), " after overflow, expected ", scale_before / 2));
      }
    } else if (torch::equal(FlatParams(*model, *engine), before)) {
      return absl::InternalError(absl::StrCat("step ", step, " did not update the parameters"));
    }
    ZT_RETURN_IF_ERROR(CheckRanksAgree(FlatParams(*model, *engine), *pg));
  }
  // Overflow at iteration 2, window 3: the scale doubles back at iteration 5.
  if (engine->loss_scale() != 256.0) {
    return absl::InternalError(absl::StrCat("final loss scale ", engine->loss_scale(), ", expected 256"));
  }
  if (engine->global_steps() != 8 || engine->skipped_steps() != 1) {
    return absl::InternalError("wrong step counters");
  }
  return absl::OkStatus();
}

class Fp16Test : public ::testing::TestWithParam<std::tuple<int, int, const char*>> {};

TEST_P(Fp16Test, OverflowOnOneRankSkipsEverywhere) {
  const auto [stage, world, mode] = GetParam();
  RankRunOptions o;
  o.world_size = world;
  o.arg = absl::StrCat(stage, ",", mode);
  RankRunResult r = RunRanks("fp16", o);
  EXPECT_TRUE(r.ok()) << r.Summary();
}

INSTANTIATE_TEST_SUITE_P(Stages, Fp16Test,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3), ::testing::Values(1, 3),
                                            ::testing::Values("inf", "nan", "min_scale")),
                         [](const auto& info) {
                           return absl::StrCat("stage", std::get<0>(info.param), "_world", std::get<1>(info.param), "_",
                                               std::get<2>(info.param));
                         });

}  // namespace
}  // namespace zt::testing

int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }
