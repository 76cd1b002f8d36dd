// Activation checkpointing: recomputation must give exactly the gradients of
// the plain run (fp32 on CPU: bitwise), including dropout, in every ZeRO
// stage, for whole units, for zt::Checkpoint inside units and for units
// inside checkpointed units; the config's options must not change results;
// and with every block checkpointed, the peak activation memory must drop to
// the saved inputs plus one block.
#include "zero/activation_checkpoint.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/init.h"
#include "engine/cpu_memory.h"
#include "engine/engine.h"
#include "engine/gathered_parameters.h"
#include "launch/rank_env.h"
#include "tests/testing/ranks.h"
#include "tests/testing/test_config.h"
#include "util/error.h"
#include "util/status.h"
#include "zero/unit.h"

namespace zt::testing {
namespace {

constexpr int64_t kDim = 16;

// x + W2 dropout(gelu(W1 ln(x))); optionally checkpoints its MLP itself.
struct BlockImpl : torch::nn::Module {
  BlockImpl(int64_t dim, int64_t hidden, bool inner_checkpoint) : inner_checkpoint(inner_checkpoint) {
    ln = register_module("ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
    fc1 = register_module("fc1", torch::nn::Linear(dim, hidden));
    fc2 = register_module("fc2", torch::nn::Linear(hidden, dim));
    drop = register_module("drop", torch::nn::Dropout(0.2));
  }
  torch::Tensor Mlp(const torch::Tensor& h) { return fc2(drop(torch::gelu(fc1(h)))); }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor h = ln(x);
    if (inner_checkpoint) return x + zt::Checkpoint([this](const torch::Tensor& t) { return Mlp(t); }, h);
    return x + Mlp(h);
  }
  bool inner_checkpoint;
  torch::nn::LayerNorm ln{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::Dropout drop{nullptr};
};

// Two blocks as one unit holding two units (nesting).
struct PairImpl : torch::nn::Module {
  PairImpl(int64_t dim) {
    a = register_module("a", zt::Unit<BlockImpl>(dim, 24, false));
    b = register_module("b", zt::Unit<BlockImpl>(dim, 40, false));
  }
  torch::Tensor forward(const torch::Tensor& x) { return b(a(x)); }
  zt::Unit<BlockImpl> a{nullptr}, b{nullptr};
};

struct NetImpl : torch::nn::Module {
  explicit NetImpl(bool inner_checkpoint) {
    in = register_module("in", torch::nn::Linear(5, kDim));
    h0 = register_module("h0", zt::Unit<BlockImpl>(kDim, 32, inner_checkpoint));
    h1 = register_module("h1", zt::Unit<BlockImpl>(kDim, 20, false));
    pair = register_module("pair", zt::Unit<PairImpl>(kDim));
    out = register_module("out", torch::nn::Linear(kDim, 3));
  }
  torch::Tensor forward(const torch::Tensor& x) { return out(pair(h1(h0(in(x))))); }
  torch::nn::Linear in{nullptr}, out{nullptr};
  zt::Unit<BlockImpl> h0{nullptr}, h1{nullptr};
  zt::Unit<PairImpl> pair{nullptr};
};
TORCH_MODULE(Net);

enum class Mode { kOff, kLeafUnits, kOuterUnits, kInside };
const char* Name(Mode m) {
  switch (m) {
    case Mode::kOff: return "off";
    case Mode::kLeafUnits: return "leaf units";
    case Mode::kOuterUnits: return "outer units (nested units recomputed)";
    case Mode::kInside: return "zt::Checkpoint inside a unit";
  }
  return "";
}

Net MakeNet(Mode mode) {
  Net net(mode == Mode::kInside);
  if (mode == Mode::kLeafUnits) {
    if (CheckpointUnits(*net) != 4) throw Error(absl::InternalError("expected 4 innermost units"));
  } else if (mode == Mode::kOuterUnits) {
    net->h1->set_activation_checkpointing(true);
    net->pair->set_activation_checkpointing(true);
  }
  return net;
}

Config ConfigFor(int stage) {
  Config c = TestConfig(stage, /*micro_batch=*/4, /*accumulation=*/2, OptimizerType::kAdamW, 1e-2);
  c.zero.reduce_bucket_size = 300;
  c.zero.overlap_comm = stage >= 2;
  c.zero.param_persistence_threshold = 0;
  return c;
}

// Trains 4 steps and returns every parameter, flattened (rank 0's view).
absl::StatusOr<torch::Tensor> Train(int stage, Mode mode, const ActivationCheckpointingConfig& ac,
                                    const std::shared_ptr<comm::ProcessGroup>& pg) {
  Config c = ConfigFor(stage);
  c.activation_checkpointing = ac;
  ZT_RETURN_IF_ERROR(ResolveBatch(c.batch, pg->size()));
  torch::manual_seed(3);
  Net net = MakeNet(mode);
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(net, c, pg));
  torch::manual_seed(100 + static_cast<uint64_t>(pg->rank()));  // per-rank data and dropout masks
  for (int step = 0; step < 4 * c.batch.accumulation_steps; ++step) {
    torch::Tensor x = torch::randn({c.batch.micro_batch, 5});
    torch::Tensor y = torch::randn({c.batch.micro_batch, 3});
    engine->Backward(torch::mse_loss(net->forward(x), y));
    engine->Step();
  }
  if (engine->global_steps() != 4) return absl::InternalError("expected 4 optimizer steps");
  if (ac.profile && TakeCheckpointProfile().calls == 0 && mode != Mode::kOff) {
    return absl::InternalError("profile on, but no checkpoint was counted");
  }
  GatheredParameters full(*engine);
  std::vector<torch::Tensor> flat;
  for (const auto& p : net->parameters()) flat.push_back(p.detach().flatten().clone());
  full.Release();
  return torch::cat(flat);
}

ZT_RANK_WORKER(checkpoint_parity) {
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  ZT_ASSIGN_OR_RETURN(auto pg, comm::InitProcessGroup(env, {}));
  const int stage = std::stoi(ctx.arg);
  ActivationCheckpointingConfig plain;
  ZT_ASSIGN_OR_RETURN(torch::Tensor reference, Train(stage, Mode::kOff, plain, pg));
  ActivationCheckpointingConfig contiguous;
  contiguous.partition_activations = true;  // required by the config checks for the next two
  contiguous.contiguous_memory_optimization = true;
  ActivationCheckpointingConfig cpu = contiguous;
  cpu.contiguous_memory_optimization = false;
  cpu.cpu_checkpointing = true;
  cpu.profile = true;
  for (Mode mode : {Mode::kLeafUnits, Mode::kOuterUnits, Mode::kInside}) {
    for (const ActivationCheckpointingConfig* ac : {&plain, &contiguous, &cpu}) {
      ZT_ASSIGN_OR_RETURN(torch::Tensor got, Train(stage, mode, *ac, pg));
      if (!torch::equal(got, reference)) {
        return absl::InternalError(absl::StrFormat(
            "stage %d, world %d, checkpointing %s (contiguous %d, cpu %d): parameters differ from the run without "
            "checkpointing by up to %g",
            stage, pg->size(), Name(mode), ac->contiguous_memory_optimization, ac->cpu_checkpointing,
            (got - reference).abs().max().item<double>()));
      }
    }
  }
  ConfigureActivationCheckpointing(plain);
  if (CheckpointSavedBytes() != 0) {
    return absl::InternalError(absl::StrCat(CheckpointSavedBytes(), " bytes of checkpoint inputs still saved"));
  }
  return absl::OkStatus();
}

class CheckpointParityTest : public ::testing::TestWithParam<int> {};

TEST_P(CheckpointParityTest, GradientsAreBitwiseThoseOfThePlainRun) {
  for (int world : {1, 2}) {
    RankRunOptions o;
    o.world_size = world;
    o.arg = std::to_string(GetParam());
    o.timeout = std::chrono::seconds(300);
    RankRunResult r = RunRanks("checkpoint_parity", o);
    EXPECT_TRUE(r.ok()) << r.Summary();
  }
}

INSTANTIATE_TEST_SUITE_P(Stages, CheckpointParityTest, ::testing::Values(0, 1, 2, 3),
                         [](const auto& info) { return absl::StrCat("stage", info.param); });

// zt::Checkpoint on its own: several inputs and outputs, an input without
// grad, an integer output, dropout; gradients bitwise equal to the plain run.
TEST(Checkpoint, MultipleInputsOutputsAndDropout) {
  ConfigureActivationCheckpointing({});
  torch::manual_seed(1);
  torch::nn::Linear lin(6, 6);
  torch::Tensor a0 = torch::randn({3, 6}), b0 = torch::randn({3, 6}), mask = torch::rand({3, 6}) > 0.5;
  auto fn = [&](const std::vector<torch::Tensor>& in) {
    torch::Tensor h = torch::dropout(lin(in[0]) * in[1], 0.3, /*train=*/true);
    return std::vector<torch::Tensor>{h.masked_fill(in[2], 0.0), torch::tanh(in[1]).sum(), h.argmax(-1)};
  };
  std::vector<torch::Tensor> grads[2];
  for (int ckpt = 0; ckpt < 2; ++ckpt) {
    lin->zero_grad();
    torch::Tensor a = a0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true);
    torch::manual_seed(9);
    std::vector<torch::Tensor> out = ckpt ? CheckpointAll(fn, {a, b, mask}) : fn({a, b, mask});
    EXPECT_FALSE(out[2].requires_grad());
    (out[0].pow(2).sum() + out[1]).backward();
    grads[ckpt] = {a.grad(), b.grad(), lin->weight.grad().clone(), lin->bias.grad().clone()};
  }
  for (size_t i = 0; i < grads[0].size(); ++i) EXPECT_TRUE(torch::equal(grads[0][i], grads[1][i])) << i;
  EXPECT_EQ(CheckpointSavedBytes(), 0);
}

// The first block sees data that needs no gradient; its parameters still do.
TEST(Checkpoint, ParametersGetGradientsWhenNoInputNeedsThem) {
  ConfigureActivationCheckpointing({});
  torch::manual_seed(2);
  torch::nn::Linear lin(4, 4);
  torch::Tensor x = torch::randn({2, 4});
  std::vector<torch::Tensor> grads;
  for (int ckpt = 0; ckpt < 2; ++ckpt) {
    lin->zero_grad();
    torch::Tensor y =
        ckpt ? zt::Checkpoint([&](const torch::Tensor& t) { return torch::tanh(lin(t)); }, x) : torch::tanh(lin(x));
    ASSERT_TRUE(y.requires_grad());
    y.sum().backward();
    grads.push_back(lin->weight.grad().clone());
  }
  EXPECT_TRUE(torch::equal(grads[0], grads[1]));
}

// Memory: L blocks, every one checkpointed. Peak extra memory of a step
// must stay within the saved inputs (L x [batch, dim]) plus what one block
// needs without checkpointing; without checkpointing it must exceed that.
constexpr int64_t kBatch = 64, kWide = 64, kHidden = 1024, kLayers = 12;

TEST(Checkpoint, PeakActivationsAreOneBlockPlusSavedInputs) {
  ASSERT_TRUE(InstallCountingCpuAllocator());
  ConfigureActivationCheckpointing({});
  struct Stack : torch::nn::Module {
    explicit Stack(int64_t layers) {
      for (int64_t i = 0; i < layers; ++i) {
        blocks.push_back(register_module("b" + std::to_string(i), zt::Unit<BlockImpl>(kWide, kHidden, false)));
      }
    }
    torch::Tensor forward(torch::Tensor x) {
      for (auto& b : blocks) x = b(x);
      return x;
    }
    std::vector<zt::Unit<BlockImpl>> blocks;
  };
  // Peak extra bytes of the second step (the first allocates the .grads).
  auto peak_step = [](Stack& model) {
    torch::Tensor x = torch::randn({kBatch, kWide}, torch::requires_grad());
    int64_t extra = 0;
    for (int step = 0; step < 2; ++step) {
      for (auto& p : model.parameters()) {
        if (p.grad().defined()) p.mutable_grad().zero_();
      }
      const int64_t base = CpuMemory().current_bytes;
      ResetCpuMemoryPeak();
      model.forward(x).pow(2).mean().backward();
      extra = CpuMemory().peak_bytes - base;
    }
    return extra;
  };
  Stack one(1);
  const int64_t one_block = peak_step(one);
  Stack plain(kLayers);
  const int64_t without = peak_step(plain);
  Stack checkpointed(kLayers);
  ASSERT_EQ(CheckpointUnits(checkpointed), kLayers);
  const int64_t with = peak_step(checkpointed);
  const int64_t saved_inputs = kLayers * kBatch * kWide * 4;
  const int64_t bound = saved_inputs + one_block + 64 * 1024;
  std::printf("  peak extra bytes: one block %lld, %lld blocks plain %lld, checkpointed %lld (bound %lld)\n",
              static_cast<long long>(one_block), static_cast<long long>(kLayers), static_cast<long long>(without),
              static_cast<long long>(with), static_cast<long long>(bound));
  EXPECT_LE(with, bound);
  EXPECT_GT(without, 2 * bound);
}

// A parameter used by two checkpointed calls gets two gradient parts; stage 2
// reduces at the first, so it must refuse clearly. Stage 0 without overlap
// sums them and trains normally.
ZT_RANK_WORKER(shared_param) {
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  ZT_ASSIGN_OR_RETURN(auto pg, comm::InitProcessGroup(env, {}));
  for (int stage : {0, 2}) {
    Config c = ConfigFor(stage);
    c.batch.gradient_accumulation_steps = 1;
    torch::manual_seed(3);
    zt::Unit<BlockImpl> block(kDim, 8, false);
    block->set_activation_checkpointing(true);
    ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(block, c, pg));
    torch::Tensor x = torch::randn({4, kDim}, torch::requires_grad());
    try {
      engine->Backward(block(block(x)).pow(2).mean());
      engine->Step();
      if (stage == 2) return absl::InternalError("stage 2 accepted a parameter with two gradient parts");
    } catch (const Error& e) {
      if (stage != 2 || !absl::StrContains(e.what(), "received a second gradient") ||
          !absl::StrContains(e.what(), "parameter 'fc")) {
        return absl::InternalError(absl::StrCat("stage ", stage, ": ", e.what()));
      }
      return absl::OkStatus();  // the engine is unusable after a failed backward
    }
  }
  return absl::OkStatus();
}

TEST(Checkpoint, SharedParameterAcrossCheckpointsIsAClearErrorWhereItCannotWork) {
  RankRunOptions o;
  o.world_size = 1;
  RankRunResult r = RunRanks("shared_param", o);
  EXPECT_TRUE(r.ok()) << r.Summary();
}

}  // namespace
}  // namespace zt::testing

int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }
