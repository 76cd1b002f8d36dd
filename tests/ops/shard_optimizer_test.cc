// Shard optimizers: the fast kernels against the double-precision reference
// at sizes that leave vector and thread tails, the sharding property (halves
// updated separately equal the whole, bit for bit), per-step momentum/beta2
// overrides, weight-decay modes, bias correction, and argument errors.
#include "ops/shard_optimizer.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/ops/optimizer_cases.h"
#include "util/error.h"

namespace zt::ops {
namespace {

using testutil::AdamConfig;
using testutil::AllCases;
using testutil::Case;
using testutil::ExpectBitEqual;
using testutil::ExpectClose;
using testutil::ExpectError;
using testutil::LrOnly;
using testutil::SgdConfig;
using testutil::Tolerance;

// Runs `steps` steps of `c` on a random shard of `n` elements with both
// implementations, the same gradients, and compares params and every state
// tensor after each step.
void CompareFastToReference(const Case& c, int64_t n, int steps) {
  SCOPED_TRACE(c.name + " n=" + std::to_string(n));
  torch::manual_seed(1234 + n);
  const auto fast = MakeShardOptimizer(c.config, Impl::kFast);
  const auto ref = MakeShardOptimizer(c.config, Impl::kReference);
  at::Tensor p_fast = torch::randn({n});
  const at::Tensor p_initial = p_fast.clone();
  at::Tensor p_ref = p_fast.clone();
  ShardState s_fast = fast->InitState(p_fast);
  ShardState s_ref = ref->InitState(p_ref);
  for (int step = 1; step <= steps; ++step) {
    // Varying gradient scales exercise both large and tiny second moments.
    const at::Tensor g = torch::randn({n}) * (0.1 * step);
    fast->Step(p_fast, g, s_fast, LrOnly(c.lr));
    ref->Step(p_ref, g, s_ref, LrOnly(c.lr));
    ASSERT_EQ(s_fast.step, step);
    ASSERT_EQ(s_ref.step, step);
    const double grad_scale = g.abs().max().item<double>();
    // An ill-conditioned element's update is off by at most 2 lr per step.
    ExpectClose(p_fast, p_ref, grad_scale, Tolerance{1e-6, 2e-6, 2.0 * c.lr * step, testutil::OutlierFraction(c)},
                "params after step " + std::to_string(step));
    ASSERT_EQ(s_fast.tensors.size(), s_ref.tensors.size());
    for (const auto& [name, t] : s_ref.tensors) {
      ExpectClose(s_fast.tensors.at(name), t, grad_scale,
                  Tolerance{1e-6, 2e-6, 1e-4 * grad_scale, testutil::OutlierFraction(c)},
                  name + " after step " + std::to_string(step));
    }
  }
  // The update actually moved the parameters (guards against a no-op pair).
  EXPECT_FALSE(torch::equal(p_fast, p_initial));
}

TEST(ShardOptimizer, FastMatchesReferenceAtTailSizes) {
  for (const Case& c : AllCases()) {
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{4099}, int64_t{1} << 20}) {
      CompareFastToReference(c, n, /*steps=*/5);
    }
  }
}

// Three intra-op threads split 2^20 + 5 elements into chunks whose starts are
// not multiples of the vector width, so every chunk has a head and a tail.
TEST(ShardOptimizer, FastMatchesReferenceWithOddThreadChunks) {
  const int saved = at::get_num_threads();
  at::set_num_threads(3);
  for (const Case& c : AllCases()) CompareFastToReference(c, (int64_t{1} << 20) + 5, 3);
  at::set_num_threads(saved);
}

// An element-wise optimizer updating two shards separately must produce
// exactly what it produces on the whole tensor: this is what lets each ZeRO
// rank update only its partition. Bit equality holds because each element's
// arithmetic is the same whatever the chunking (no FMA contraction, IEEE sqrt).
TEST(ShardOptimizer, TwoShardsEqualTheWhole) {
  for (const Case& c : AllCases()) {
    for (int64_t n : {int64_t{4099}, (int64_t{1} << 20) + 3}) {
      SCOPED_TRACE(c.name + " n=" + std::to_string(n));
      torch::manual_seed(7);
      const auto opt = MakeShardOptimizer(c.config, Impl::kFast);
      const int64_t split = n / 2 + 1;  // unequal, unaligned halves
      at::Tensor whole = torch::randn({n});
      at::Tensor lo = whole.slice(0, 0, split).clone();
      at::Tensor hi = whole.slice(0, split, n).clone();
      ShardState s_whole = opt->InitState(whole);
      ShardState s_lo = opt->InitState(lo);
      ShardState s_hi = opt->InitState(hi);
      for (int step = 0; step < 4; ++step) {
        const at::Tensor g = torch::randn({n});
        opt->Step(whole, g, s_whole, LrOnly(c.lr));
        opt->Step(lo, g.slice(0, 0, split).contiguous(), s_lo, LrOnly(c.lr));
        opt->Step(hi, g.slice(0, split, n).contiguous(), s_hi, LrOnly(c.lr));
      }
      ExpectBitEqual(torch::cat({lo, hi}), whole, "params");
      for (const auto& [name, t] : s_whole.tensors) {
        ExpectBitEqual(torch::cat({s_lo.tensors.at(name), s_hi.tensors.at(name)}), t, name);
      }
    }
  }
}

// Runs 3 steps and returns the parameters.
at::Tensor RunSteps(const OptimizerConfig& config, const StepHyper& hyper, Impl impl) {
  torch::manual_seed(99);
  const auto opt = MakeShardOptimizer(config, impl);
  at::Tensor p = torch::randn({1031});
  ShardState s = opt->InitState(p);
  for (int i = 0; i < 3; ++i) opt->Step(p, torch::randn({1031}), s, hyper);
  return p;
}

// StepHyper::momentum must act exactly like configuring that beta1 / SGD
// momentum, and StepHyper::beta2 like configuring beta2.
TEST(ShardOptimizer, MomentumAndBeta2OverridesReplaceConfig) {
  for (Impl impl : {Impl::kFast, Impl::kReference}) {
    for (OptimizerType type : {OptimizerType::kAdam, OptimizerType::kAdamW, OptimizerType::kLion}) {
      OptimizerConfig base;
      base.type = type;
      base.weight_decay = 0.01;
      base.betas = {0.9, 0.999};
      OptimizerConfig wanted = base;
      wanted.betas = {0.85, 0.99};
      StepHyper hyper = LrOnly(1e-3);
      hyper.momentum = 0.85;
      hyper.beta2 = 0.99;
      ExpectBitEqual(RunSteps(base, hyper, impl), RunSteps(wanted, LrOnly(1e-3), impl),
                     std::string("beta overrides, type ") + std::to_string(static_cast<int>(type)));
      EXPECT_FALSE(torch::equal(RunSteps(base, LrOnly(1e-3), impl), RunSteps(wanted, LrOnly(1e-3), impl)));
    }
    OptimizerConfig sgd = SgdConfig(0.9, 0.1, false, 0.0);
    OptimizerConfig sgd_wanted = SgdConfig(0.5, 0.1, false, 0.0);
    StepHyper hyper = LrOnly(0.1);
    hyper.momentum = 0.5;
    ExpectBitEqual(RunSteps(sgd, hyper, impl), RunSteps(sgd_wanted, LrOnly(0.1), impl), "SGD momentum");
    EXPECT_FALSE(torch::equal(RunSteps(sgd, LrOnly(0.1), impl), RunSteps(sgd_wanted, LrOnly(0.1), impl)));

    // Adagrad has no momentum; the override is ignored.
    OptimizerConfig adagrad;
    adagrad.type = OptimizerType::kAdagrad;
    StepHyper adagrad_hyper = LrOnly(0.1);
    adagrad_hyper.momentum = 0.5;
    ExpectBitEqual(RunSteps(adagrad, adagrad_hyper, impl), RunSteps(adagrad, LrOnly(0.1), impl),
                   "Adagrad ignores momentum");
  }
}

// SGD configured without momentum but driven by a momentum schedule gets a
// buffer lazily, initialised from the gradient of its first momentum step,
// as torch.optim.SGD does when momentum becomes non-zero.
TEST(ShardOptimizer, SgdCreatesMomentumBufferOnFirstMomentumStep) {
  const auto opt = MakeShardOptimizer(SgdConfig(0.0, 0.0, false, 0.0), Impl::kFast);
  at::Tensor p = torch::zeros({5});
  ShardState s = opt->InitState(p);
  EXPECT_EQ(s.tensors.count("momentum_buffer"), 0u);
  opt->Step(p, torch::ones({5}), s, LrOnly(0.1));  // plain step: p = -0.1
  EXPECT_EQ(s.tensors.count("momentum_buffer"), 0u);
  StepHyper hyper = LrOnly(0.1);
  hyper.momentum = 0.9;
  opt->Step(p, torch::full({5}, 2.0f), s, hyper);  // buf = g = 2; p = -0.1 - 0.1 * 2 = -0.3
  ASSERT_EQ(s.tensors.count("momentum_buffer"), 1u);
  EXPECT_TRUE(torch::allclose(s.tensors.at("momentum_buffer"), torch::full({5}, 2.0f)));
  EXPECT_TRUE(torch::allclose(p, torch::full({5}, -0.3f)));
  opt->Step(p, torch::full({5}, 1.0f), s, hyper);  // buf = 0.9 * 2 + 1 = 2.8; p = -0.58
  EXPECT_TRUE(torch::allclose(s.tensors.at("momentum_buffer"), torch::full({5}, 2.8f)));
  EXPECT_TRUE(torch::allclose(p, torch::full({5}, -0.58f)));
}

// One step on a single element, worked by hand: p = 1, g = 0.5, lr = 0.1,
// weight_decay = 0.1, betas (0.9, 0.999), eps 1e-8, step 1.
TEST(ShardOptimizer, AdamWeightDecayModesAndBiasCorrectionByHand) {
  auto one_step = [](OptimizerConfig config) {
    config.lr = 0.1;
    config.weight_decay = 0.1;
    config.betas = {0.9, 0.999};
    config.eps = 1e-8;
    at::Tensor p = torch::ones({1});
    const auto opt = MakeShardOptimizer(config, Impl::kReference);
    ShardState s = opt->InitState(p);
    opt->Step(p, torch::full({1}, 0.5f), s, LrOnly(0.1));
    return double{p.item<float>()};
  };
  // L2 (Adam, adam_w_mode false): g' = 0.5 + 0.1 * 1 = 0.6; m = 0.1 * 0.6 = 0.06;
  // v = 0.001 * 0.36 = 3.6e-4; bc1 = 0.1, bc2 = 0.001;
  // denom = sqrt(3.6e-4) / sqrt(1e-3) + 1e-8 = 0.6 + 1e-8;
  // p = 1 - (0.1 / 0.1) * 0.06 / (0.6 + 1e-8) = 0.9 + 1.7e-9.
  EXPECT_NEAR(one_step(AdamConfig(false, 0.1)), 0.9, 1e-7);
  // Decoupled (Adam with adam_w_mode true, or AdamW): p = 1 * (1 - 0.1 * 0.1) = 0.99;
  // m = 0.05; v = 2.5e-4; denom = sqrt(2.5e-4) / sqrt(1e-3) + 1e-8 = 0.5 + 1e-8;
  // p = 0.99 - 1 * 0.05 / 0.5 = 0.89.
  EXPECT_NEAR(one_step(AdamConfig(true, 0.1)), 0.89, 1e-7);
  OptimizerConfig adamw = AdamConfig(false, 0.1);  // AdamW ignores adam_w_mode = false
  adamw.type = OptimizerType::kAdamW;
  EXPECT_NEAR(one_step(adamw), 0.89, 1e-7);
  // No bias correction: denom = sqrt(2.5e-4) + 1e-8 = 0.0158113983;
  // p = 0.99 - 0.1 * 0.05 / 0.0158113983 = 0.99 - 0.3162275667 = 0.6737724333.
  EXPECT_NEAR(one_step(AdamConfig(true, 0.1, false)), 0.6737724333, 1e-6);
}

TEST(ShardOptimizer, StateNamesFollowTorch) {
  const at::Tensor p = torch::zeros({3});
  auto names = [&](const OptimizerConfig& c) {
    std::vector<std::string> out;
    for (const auto& [name, t] : MakeShardOptimizer(c)->InitState(p).tensors) {
      EXPECT_EQ(t.numel(), 3);
      out.push_back(name);
    }
    return out;
  };
  EXPECT_EQ(names(AdamConfig(true, 0.0)), (std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
  EXPECT_EQ(names(SgdConfig(0.9, 0.0, false, 0.0)), (std::vector<std::string>{"momentum_buffer"}));
  EXPECT_EQ(names(SgdConfig(0.0, 0.0, false, 0.0)), (std::vector<std::string>{}));
  OptimizerConfig adagrad;
  adagrad.type = OptimizerType::kAdagrad;
  adagrad.initial_accumulator_value = 0.25;
  EXPECT_EQ(names(adagrad), (std::vector<std::string>{"sum"}));
  EXPECT_TRUE(torch::equal(MakeShardOptimizer(adagrad)->InitState(p).tensors.at("sum"), torch::full({3}, 0.25f)));
  OptimizerConfig lion;
  lion.type = OptimizerType::kLion;
  EXPECT_EQ(names(lion), (std::vector<std::string>{"exp_avg"}));
}

TEST(ShardOptimizer, RejectsBadConfigNamingTheKey) {
  OptimizerConfig c = AdamConfig(true, 0.0);
  c.betas = {0.9, 1.0};
  ExpectError(absl::StatusCode::kInvalidArgument, "optimizer.params.betas", [&] { MakeShardOptimizer(c); });
  c = AdamConfig(true, -0.1);
  ExpectError(absl::StatusCode::kInvalidArgument, "optimizer.params.weight_decay", [&] { MakeShardOptimizer(c); });
  c = AdamConfig(true, 0.0);
  c.lr = -1.0;
  ExpectError(absl::StatusCode::kInvalidArgument, "optimizer.params.lr", [&] { MakeShardOptimizer(c); });
  c = SgdConfig(0.9, 0.1, true, 0.0);
  ExpectError(absl::StatusCode::kInvalidArgument, "optimizer.params.nesterov", [&] { MakeShardOptimizer(c); });
  c = SgdConfig(0.0, 0.0, true, 0.0);
  EXPECT_FALSE(ValidateOptimizerConfig(c).ok());
  c.type = OptimizerType::kAdagrad;
  c.nesterov = false;
  c.initial_accumulator_value = -1.0;
  ExpectError(absl::StatusCode::kInvalidArgument, "initial_accumulator_value", [&] { MakeShardOptimizer(c); });
  EXPECT_TRUE(ValidateOptimizerConfig(AdamConfig(false, 0.01)).ok());
}

TEST(ShardOptimizer, RejectsBadTensorsAndLeavesStateUntouched) {
  const auto opt = MakeShardOptimizer(AdamConfig(true, 0.0));
  at::Tensor p = torch::zeros({8});
  ShardState s = opt->InitState(p);
  at::Tensor g = torch::ones({8});
  at::Tensor g_double = torch::ones({8}, torch::kDouble);
  ExpectError(absl::StatusCode::kInvalidArgument, "grads must be a contiguous float32",
              [&] { opt->Step(p, g_double, s, LrOnly(0.1)); });
  at::Tensor g_short = torch::ones({7});
  ExpectError(absl::StatusCode::kInvalidArgument, "7", [&] { opt->Step(p, g_short, s, LrOnly(0.1)); });
  at::Tensor strided = torch::zeros({16}).slice(0, 0, 16, 2);
  ExpectError(absl::StatusCode::kInvalidArgument, "non-contiguous", [&] { opt->Step(strided, g, s, LrOnly(0.1)); });
  ExpectError(absl::StatusCode::kInvalidArgument, "lr", [&] { opt->Step(p, g, s, LrOnly(std::nan(""))); });
  StepHyper bad_momentum = LrOnly(0.1);
  bad_momentum.momentum = 1.5;
  ExpectError(absl::StatusCode::kInvalidArgument, "momentum", [&] { opt->Step(p, g, s, bad_momentum); });
  ShardState missing = s;
  missing.tensors.erase("exp_avg_sq");
  ExpectError(absl::StatusCode::kFailedPrecondition, "exp_avg_sq", [&] { opt->Step(p, g, missing, LrOnly(0.1)); });
  ShardState wrong_size = opt->InitState(torch::zeros({9}));
  ExpectError(absl::StatusCode::kFailedPrecondition, "8 elements", [&] { opt->Step(p, g, wrong_size, LrOnly(0.1)); });
  EXPECT_EQ(s.step, 0);
  EXPECT_EQ(missing.step, 0);
  EXPECT_TRUE(torch::equal(p, torch::zeros({8})));
  EXPECT_TRUE(torch::equal(s.tensors.at("exp_avg"), torch::zeros({8})));
}

// The split update (ShardOptimizer::StepMoments, then ApplyIncrement with
// the same hyperparameters) against Step on the same inputs: bit for bit on
// every ISA variant (the same float operations in the same order), within
// the usual tolerance on the reference (the increment is rounded to float
// between the passes). Gradient scale, momentum override and a changing lr
// included; sizes leave vector and tile tails, and three threads cut odd
// chunks.
TEST(ShardOptimizer, SplitUpdateEqualsStep) {
  const int saved = at::get_num_threads();
  at::set_num_threads(3);
  int split_cases = 0;
  for (const Case& c : AllCases()) {
    std::vector<std::unique_ptr<ShardOptimizer>> opts;
    for (const kernels::KernelTable* k : testutil::AvailableKernels()) opts.push_back(MakeShardOptimizer(c.config, *k));
    opts.push_back(MakeShardOptimizer(c.config, Impl::kReference));
    const bool splits = c.config.type == OptimizerType::kLion || c.config.type == OptimizerType::kAdamW ||
                        (c.config.type == OptimizerType::kAdam && c.config.adam_w_mode);
    ASSERT_EQ(opts.front()->SplitsUpdate(), splits) << c.name;
    if (!splits) continue;
    ++split_cases;
    for (size_t o = 0; o < opts.size(); ++o) {
      const bool reference = o + 1 == opts.size();
      for (int64_t n : {int64_t{1}, int64_t{4099}, (int64_t{1} << 20) + 5}) {
        SCOPED_TRACE(c.name + (reference ? " reference" : " fast") + " n=" + std::to_string(n));
        torch::manual_seed(31 + n);
        at::Tensor p_step = torch::randn({n});
        at::Tensor p_split = p_step.clone();
        ShardState s_step = opts[o]->InitState(p_step);
        ShardState s_split = opts[o]->InitState(p_split);
        for (int step = 1; step <= 4; ++step) {
          StepHyper hyper = LrOnly(c.lr * (1.0 + 0.25 * step));
          if (step == 3) hyper.momentum = 0.8;
          const double grad_scale = step == 2 ? 0.5 : 1.0;
          const at::Tensor g = torch::randn({n}) * (0.1 * step);
          StepExtras extras;
          extras.grad_scale = grad_scale;
          opts[o]->Step(p_step, g, s_step, hyper, extras);
          at::Tensor increment = g.clone();
          opts[o]->StepMoments(increment, s_split, hyper, grad_scale);
          opts[o]->ApplyIncrement(p_split, increment, hyper);
          ASSERT_EQ(s_split.step, s_step.step);
          for (const auto& [name, t] : s_step.tensors) {
            ExpectBitEqual(s_split.tensors.at(name), t, name + " after step " + std::to_string(step));
          }
          if (reference) {
            ExpectClose(p_split, p_step, 1.0, Tolerance{1e-6, 2e-6, 0.0, 0.0},
                        "params after step " + std::to_string(step));
          } else {
            ExpectBitEqual(p_split, p_step, "params after step " + std::to_string(step));
          }
        }
      }
    }
  }
  at::set_num_threads(saved);
  EXPECT_EQ(split_cases, 4);  // AdamDecoupled, AdamW, AdamNoBiasCorrection, Lion
}

TEST(ShardOptimizer, SplitUpdateRejectsWhatItCannotRun) {
  const auto l2 = MakeShardOptimizer(AdamConfig(false, 0.01));
  at::Tensor p = torch::zeros({8});
  at::Tensor g = torch::ones({8});
  ShardState s = l2->InitState(p);
  ExpectError(absl::StatusCode::kFailedPrecondition, "no split update",
              [&] { l2->StepMoments(g, s, LrOnly(0.1), 1.0); });
  ExpectError(absl::StatusCode::kFailedPrecondition, "no split update", [&] { l2->ApplyIncrement(p, g, LrOnly(0.1)); });
  const auto sgd = MakeShardOptimizer(SgdConfig(0.9, 0.0, false, 0.0));
  ExpectError(absl::StatusCode::kFailedPrecondition, "SGD has no split update",
              [&] { sgd->ApplyIncrement(p, g, LrOnly(0.1)); });

  const auto adamw = MakeShardOptimizer(AdamConfig(true, 0.01));
  s = adamw->InitState(p);
  at::Tensor bf16 = torch::ones({8}, torch::kBFloat16);
  ExpectError(absl::StatusCode::kInvalidArgument, "float32", [&] { adamw->StepMoments(bf16, s, LrOnly(0.1), 1.0); });
  ExpectError(absl::StatusCode::kInvalidArgument, "lr", [&] { adamw->StepMoments(g, s, LrOnly(std::nan("")), 1.0); });
  ExpectError(absl::StatusCode::kInvalidArgument, "separate buffers",
              [&] { adamw->ApplyIncrement(p, p, LrOnly(0.1)); });
  at::Tensor short_inc = torch::ones({7});
  ExpectError(absl::StatusCode::kInvalidArgument, "7", [&] { adamw->ApplyIncrement(p, short_inc, LrOnly(0.1)); });
  EXPECT_EQ(s.step, 0);
  EXPECT_TRUE(torch::equal(p, torch::zeros({8})));
  EXPECT_TRUE(torch::equal(g, torch::ones({8})));
}

TEST(ShardOptimizer, EmptyShardIsANoOpStep) {
  for (const Case& c : AllCases()) {
    const auto opt = MakeShardOptimizer(c.config);
    at::Tensor p = torch::zeros({0});
    ShardState s = opt->InitState(p);
    opt->Step(p, torch::zeros({0}), s, LrOnly(c.lr));
    EXPECT_EQ(s.step, 1) << c.name;
  }
}

}  // namespace
}  // namespace zt::ops
