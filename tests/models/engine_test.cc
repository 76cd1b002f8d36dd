// The built-in models under the engine, as `zt train` runs them: ZeRO stage 3
// (units, the root unit holding the embeddings, GPT-2's tied head, rotary
// tables computed in forward, BERT's attention mask passed into every layer
// unit) trains with the same losses as stage 0, with and without activation
// checkpointing, on 1 and 2 ranks.
#include "engine/engine.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/group_options.h"
#include "comm/init.h"
#include "launch/rank_env.h"
#include "models/registry.h"
#include "tests/testing/ranks.h"
#include "tests/testing/test_config.h"
#include "util/error.h"
#include "util/status.h"

namespace zt::models {
namespace {

using testing::RankContext;
using testing::RankRunOptions;
using testing::RankRunResult;
using testing::RunRanks;

Config EngineConfig(int stage) {
  Config c = testing::TestConfig(stage, /*micro_batch=*/2, /*accumulation=*/1, OptimizerType::kAdamW, 3e-3);
  if (stage == 3) {
    c.zero.param_persistence_threshold = 0;  // shard even the small norms
    c.zero.prefetch_bucket_size = 0;
  }
  return c;
}

// Losses of `steps` steps on one fixed batch (this rank's).
absl::StatusOr<std::vector<double>> Train(const std::string& name, int stage, bool checkpoint, int rank,
                                          const std::shared_ptr<comm::ProcessGroup>& pg) {
  // bert-tiny with a smaller vocab, to keep the run short.
  const std::map<std::string, int64_t> overrides =
      name == "bert-tiny" ? std::map<std::string, int64_t>{{"vocab", 1000}} : std::map<std::string, int64_t>{};
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, CreateModel(ModelSpec{name, overrides, 1}));
  if (checkpoint) model->CheckpointActivations(0);
  model->module()->eval();  // no dropout: the stages must see the same function
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(model->module(), EngineConfig(stage), pg));
  torch::manual_seed(100 + static_cast<uint64_t>(rank));
  const bool lm = model->info().task == Task::kLanguageModel;
  const bool seq = model->info().task == Task::kSequenceClassification;
  torch::Tensor x, y, mask;
  if (lm) {
    torch::Tensor tok = torch::randint(model->info().vocab_size, {2, 17}, torch::kLong);
    x = tok.narrow(1, 0, 16);
    y = tok.narrow(1, 1, 16);
  } else if (seq) {
    x = torch::randint(model->info().vocab_size, {2, 16}, torch::kLong);
    y = torch::randint(model->info().num_classes, {2}, torch::kLong);
    mask = torch::ones({2, 16}, torch::kLong);
    mask.index_put_({1, torch::indexing::Slice(10, 16)}, 0);  // one padded row
  } else {
    x = torch::randn({2, 1, 28, 28});
    y = torch::randint(10, {2}, torch::kLong);
  }
  std::vector<double> losses;
  for (int step = 0; step < 4; ++step) {
    torch::Tensor out = (seq ? model->ForwardMasked(x, mask) : model->Forward(x)).to(torch::kFloat);
    torch::Tensor loss = lm    ? torch::cross_entropy_loss(out.reshape({-1, out.size(-1)}), y.reshape({-1}))
                         : seq ? torch::cross_entropy_loss(out, y)
                               : torch::nll_loss(out, y);
    losses.push_back(loss.item<double>());
    engine->Backward(loss);
    engine->Step();
  }
  return losses;
}

ZT_RANK_WORKER(models_stage3) {
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  comm::GroupOptions options;
  options.timeout = std::chrono::seconds(60);
  ZT_ASSIGN_OR_RETURN(auto pg, comm::InitProcessGroup(env, options));
  for (const char* name : {"gpt2-tiny", "llama-tiny", "mnist-cnn", "bert-tiny"}) {
    for (bool checkpoint : {false, true}) {
      ZT_ASSIGN_OR_RETURN(std::vector<double> plain, Train(name, 0, checkpoint, ctx.rank, pg));
      ZT_ASSIGN_OR_RETURN(std::vector<double> sharded, Train(name, 3, checkpoint, ctx.rank, pg));
      for (size_t i = 0; i < plain.size(); ++i) {
        if (!std::isfinite(sharded[i]) || std::abs(sharded[i] - plain[i]) > 1e-4 * std::abs(plain[i]) + 1e-5) {
          return absl::InternalError(
              absl::StrFormat("%s (checkpointing %d): step %d loss %.7f at stage 3, %.7f at "
                              "stage 0",
                              name, checkpoint, i + 1, sharded[i], plain[i]));
        }
      }
      if (!(plain.back() < plain.front())) {
        return absl::InternalError(
            absl::StrFormat("%s: loss did not fall (%.4f -> %.4f)", name, plain.front(), plain.back()));
      }
    }
  }
  return absl::OkStatus();
}

TEST(ModelsEngine, Stage3TrainsLikeStage0) {
  for (int world : {1, 2}) {
    RankRunOptions o;
    o.world_size = world;
    o.timeout = std::chrono::seconds(300);
    RankRunResult r = RunRanks("models_stage3", o);
    EXPECT_TRUE(r.ok()) << "world " << world << ": " << r.Summary();
  }
}

}  // namespace
}  // namespace zt::models

int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }
