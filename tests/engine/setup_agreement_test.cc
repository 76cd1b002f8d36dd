// Engine::Create on ranks that were not started alike: one rank with another
// learning rate, stage or parameter shape, a frozen parameter, its modules
// registered in another order. Before the check, each of these trained
// without an error (ZeRO stage 1-2 shards the optimizer, so a rank with
// another lr updated its slice of every parameter with its own lr). Every
// rank must now fail in Engine::Create, the differing rank naming what
// differs and the others naming the rank; settings that may rightly differ
// per node (the log cadence, the NVMe path) and identical ranks still train.
// Optimizer param groups are compared too (a rank with another group weight
// decay would update its shard with it).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "comm/init.h"
#include "engine/engine.h"
#include "launch/rank_env.h"
#include "tests/testing/ranks.h"
#include "util/status.h"

namespace zt::testing {
namespace {

struct MlpImpl : torch::nn::Module {
  MlpImpl(int hidden, bool reversed) {
    if (reversed) {
      b = register_module("b", torch::nn::Linear(hidden, 5));
      a = register_module("a", torch::nn::Linear(16, hidden));
    } else {
      a = register_module("a", torch::nn::Linear(16, hidden));
      b = register_module("b", torch::nn::Linear(hidden, 5));
    }
  }
  torch::Tensor forward(const torch::Tensor& x) { return b(torch::tanh(a(x))); }
  torch::nn::Linear a{nullptr}, b{nullptr};
};
TORCH_MODULE(Mlp);

// ctx.arg: which way rank 1 differs, "|", the phrase rank 1's error must hold
// ("" where Create must succeed on every rank).
ZT_RANK_WORKER(setup_agreement) {
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  ZT_ASSIGN_OR_RETURN(auto pg, comm::InitProcessGroup(env, {}));
  const size_t bar = ctx.arg.find('|');
  const std::string variant = ctx.arg.substr(0, bar);
  const std::string expected = ctx.arg.substr(bar + 1);
  const bool odd = ctx.rank == 1;

  Config c;
  c.batch.train_micro_batch_size_per_gpu = 2;
  c.batch.gradient_accumulation_steps = 1;
  c.optimizer.present = true;
  c.optimizer.lr = (odd && variant == "lr") ? 2e-3 : 1e-3;
  c.zero.stage = (odd && variant == "stage") ? 2 : 1;
  c.steps_per_print = (odd && variant == "steps_per_print") ? 7 : 1000;
  if (variant == "nvme_path") c.zero.offload_optimizer.nvme_path = absl::StrCat("/node", ctx.rank, "/swap");
  Mlp model(odd && variant == "shape" ? 9 : 8, odd && variant == "order");
  if (odd && variant == "frozen") model->a->bias.set_requires_grad(false);

  // Optimizer param groups: the biases without decay everywhere (groups),
  // rank 1 with another decay (group_wd) or none given (group_missing).
  EngineOptions options;
  if (variant.rfind("group", 0) == 0 && !(odd && variant == "group_missing")) {
    ParamGroupOptions no_decay;
    no_decay.name = "no_decay";
    no_decay.params = {"a.bias", "b.bias"};
    no_decay.weight_decay = odd && variant == "group_wd" ? 0.1 : 0.0;
    options.param_groups = {no_decay};
  }
  auto engine = Engine::Create(model, c, pg, options);
  if (expected.empty()) {
    if (!engine.ok()) return absl::InternalError(absl::StrCat("Create failed: ", engine.status().ToString()));
    (*engine)->Backward(model->forward(torch::randn({2, 16})).pow(2).mean());
    (*engine)->Step();
    return absl::OkStatus();
  }
  if (engine.ok()) return absl::InternalError("Create succeeded on ranks started differently");
  const std::string msg(engine.status().message());
  const std::string want =
      odd ? expected : std::string("rank 1 differs from rank 0 in its model and ds_config settings");
  if (!absl::StrContains(msg, want) || !absl::StrContains(msg, "same model and settings")) {
    return absl::InternalError(absl::StrCat("rank ", ctx.rank, ": expected \"", want, "\" in: ", msg));
  }
  return absl::OkStatus();
}

struct Variant {
  const char* name;
  const char* expected;  // in rank 1's error; "" where the ranks still train
};

TEST(EngineSetupAgreement, RanksStartedDifferentlyAreRefusedByName) {
  const Variant variants[] = {
      {"lr", "config optimizer.params.lr is 0.001 on rank 0 and 0.002 here"},
      {"stage", "config zero_optimization.stage is 1 on rank 0 and 2 here"},
      {"shape", "parameter a.weight is [8, 16] Float trainable on rank 0 and [9, 16] Float trainable here"},
      {"frozen", "parameter a.bias is [8] Float trainable on rank 0 and [8] Float frozen here"},
      {"order", "item 0 is parameter a.weight on rank 0 and parameter b.weight here (the same items in another order)"},
      {"group_wd", "optimizer param group 0 is "},
      {"group_missing", "is on rank 0 but not here"},
      {"groups", ""},
      {"same", ""},
      {"steps_per_print", ""},
      {"nvme_path", ""},
  };
  for (const Variant& v : variants) {
    for (int world : {2, 3}) {
      SCOPED_TRACE(absl::StrCat(v.name, ", world ", world));
      RankRunOptions o;
      o.world_size = world;
      o.arg = absl::StrCat(v.name, "|", v.expected);
      RankRunResult r = RunRanks("setup_agreement", o);
      EXPECT_TRUE(r.ok()) << r.Summary();
    }
  }
}

}  // namespace
}  // namespace zt::testing

int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }
