// Shard optimizers against LibTorch's torch::optim (Adam, AdamW, SGD, Adagrad)
// on a real nn::Linear weight, parameters and optimizer state compared after
// every step: Adam and AdamW over 100 steps on every ISA variant this CPU
// runs, the others over 12; Lion against a step-by-step formula written here.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ops/kernels.h"
#include "ops/shard_optimizer.h"
#include "tests/ops/optimizer_cases.h"

namespace zt::ops {
namespace {

StepHyper LrOnly(double lr) {
  StepHyper h;
  h.lr = lr;
  return h;
}

constexpr int kSteps = 12;
constexpr int kAdamSteps = 100;

// Both sides compute in float; they differ in operation order (torch's
// vectorised kernels fuse multiply-adds, we round coefficients once), so
// elements drift apart by a few ulps (measured: at most 2.2e-7 * max|torch|
// after 12 steps, 2.6e-7 over 100 steps). Tolerance per element:
//   |ours - torch| <= 1e-6 * |torch| + 1e-6 * max|torch|.
// That is tight enough to see eps placement: the eps = 1e-3 cases move p by
// ~1e-5 per step if eps were added inside the square root or before the
// bias correction.
void ExpectNear(const at::Tensor& ours, const at::Tensor& theirs, const std::string& what) {
  const at::Tensor a = ours.reshape({-1});
  const at::Tensor b = theirs.detach().reshape({-1});
  ASSERT_EQ(a.numel(), b.numel()) << what;
  const double scale = b.abs().max().item<double>();
  const at::Tensor tol = b.abs() * 1e-6 + 1e-6 * scale;
  const at::Tensor excess = (a - b).abs() - tol;
  EXPECT_LE(excess.max().item<double>(), 0.0)
      << what << ": max |diff| " << (a - b).abs().max().item<double>() << " (scale " << scale << ")";
}

// Per step, the lr and (optionally) beta1 / SGD momentum a scheduler would set.
struct Schedule {
  std::vector<double> lr;
  std::vector<double> momentum;  // empty: keep the configured value
};

Schedule ConstantLr(double lr, int steps = kSteps) { return {std::vector<double>(steps, lr), {}}; }

// A OneCycle-like wiggle: lr rises and falls, momentum moves inversely.
Schedule CycledLrAndMomentum(double lr, int steps = kSteps) {
  Schedule s;
  for (int k = 0; k < steps; ++k) {
    const double up = k < steps / 2 ? k : steps - k;
    s.lr.push_back(lr * (0.5 + up / steps));
    s.momentum.push_back(0.95 - 0.1 * up / steps);
  }
  return s;
}

using TorchFactory = std::function<std::unique_ptr<torch::optim::Optimizer>(at::Tensor)>;
// Sets lr / momentum on the torch optimizer's only param group.
using TorchSetter = std::function<void(torch::optim::Optimizer&, double lr, std::optional<double> momentum)>;
// Returns torch's state tensor for our state name.
using TorchState = std::function<at::Tensor(torch::optim::OptimizerParamState&, const std::string&)>;

// Runs as many steps as `schedule` has, on `kernels` (the active variant
// when null).
void CompareWithTorch(const std::string& name, const OptimizerConfig& config, const TorchFactory& make_torch,
                      const TorchSetter& set_hyper, const TorchState& torch_state, const Schedule& schedule,
                      const kernels::KernelTable* kernels = nullptr) {
  SCOPED_TRACE(name + (kernels == nullptr ? "" : std::string(" on ") + IsaName(kernels->isa)));
  torch::manual_seed(2024);
  torch::nn::Linear layer(37, 29);  // a real parameter: 29 x 37 weight
  at::Tensor weight = layer->weight;
  auto theirs = make_torch(weight);

  const auto ours = kernels == nullptr ? MakeShardOptimizer(config, Impl::kFast) : MakeShardOptimizer(config, *kernels);
  at::Tensor shard = weight.detach().clone().reshape({-1});
  ShardState state = ours->InitState(shard);
  const at::Tensor initial = shard.clone();

  const int steps = static_cast<int>(schedule.lr.size());
  for (int k = 0; k < steps; ++k) {
    const at::Tensor grad = torch::randn(weight.sizes()) * 0.5;
    std::optional<double> momentum;
    if (!schedule.momentum.empty()) momentum = schedule.momentum[k];

    weight.mutable_grad() = grad.clone();
    set_hyper(*theirs, schedule.lr[k], momentum);
    theirs->step();

    StepHyper hyper = LrOnly(schedule.lr[k]);
    hyper.momentum = momentum;
    ours->Step(shard, grad.reshape({-1}).contiguous(), state, hyper);

    ExpectNear(shard, weight, "weight after step " + std::to_string(k + 1));
    // Plain SGD keeps no state on either side.
    const std::string key = c10::guts::to_string(weight.unsafeGetTensorImpl());
    ASSERT_EQ(theirs->state().count(key), state.tensors.empty() ? 0u : 1u);
    for (const auto& [state_name, t] : state.tensors) {
      ExpectNear(t, torch_state(*theirs->state().at(key), state_name),
                 state_name + " after step " + std::to_string(k + 1));
    }
  }
  EXPECT_FALSE(torch::equal(shard, initial));
}

OptimizerConfig AdamConfig(OptimizerType type, bool adam_w_mode, double weight_decay, double eps = 1e-8) {
  OptimizerConfig c;
  c.type = type;
  c.adam_w_mode = adam_w_mode;
  c.betas = {0.9, 0.999};
  c.eps = eps;
  c.weight_decay = weight_decay;
  c.bias_correction = true;
  return c;
}

template <typename Options>
void SetAdamHyper(torch::optim::Optimizer& opt, double lr, std::optional<double> momentum) {
  auto& o = static_cast<Options&>(opt.param_groups()[0].options());
  o.lr(lr);
  if (momentum) o.betas(std::make_tuple(*momentum, std::get<1>(o.betas())));
}

at::Tensor AdamState(torch::optim::OptimizerParamState& s, const std::string& name) {
  auto& st = static_cast<torch::optim::AdamParamState&>(s);
  return name == "exp_avg" ? st.exp_avg() : st.exp_avg_sq();
}

at::Tensor AdamWState(torch::optim::OptimizerParamState& s, const std::string& name) {
  auto& st = static_cast<torch::optim::AdamWParamState&>(s);
  return name == "exp_avg" ? st.exp_avg() : st.exp_avg_sq();
}

// Adam with L2 weight decay (DeepSpeed "Adam" with adam_w_mode false) is
// torch.optim.Adam, over 100 steps on every variant.
TEST(TorchParity, AdamL2MatchesTorchAdam) {
  for (const kernels::KernelTable* k : testutil::AvailableKernels()) {
    for (auto [wd, eps] : {std::pair{0.0, 1e-8}, std::pair{0.05, 1e-8}, std::pair{0.05, 1e-3}}) {
      for (const Schedule& schedule : {ConstantLr(1e-2, kAdamSteps), CycledLrAndMomentum(1e-2, kAdamSteps)}) {
        CompareWithTorch(
            "Adam L2 wd=" + std::to_string(wd) + " eps=" + std::to_string(eps),
            AdamConfig(OptimizerType::kAdam, false, wd, eps),
            [&](at::Tensor p) {
              return std::make_unique<torch::optim::Adam>(std::vector<at::Tensor>{p},
                                                          torch::optim::AdamOptions(1e-2)
                                                              .betas(std::make_tuple(0.9, 0.999))
                                                              .eps(eps)
                                                              .weight_decay(wd)
                                                              .amsgrad(false));
            },
            SetAdamHyper<torch::optim::AdamOptions>, AdamState, schedule, k);
      }
    }
  }
}

// AdamW, and Adam with adam_w_mode true (DeepSpeed's default), are
// torch.optim.AdamW, over 100 steps on every variant.
TEST(TorchParity, AdamWAndAdamWModeMatchTorchAdamW) {
  struct Variant {
    std::string name;
    OptimizerConfig config;
  };
  const std::vector<Variant> variants = {
      {"AdamW wd=0.1", AdamConfig(OptimizerType::kAdamW, true, 0.1)},
      {"AdamW wd=0", AdamConfig(OptimizerType::kAdamW, true, 0.0)},
      {"AdamW eps=1e-3", AdamConfig(OptimizerType::kAdamW, true, 0.1, 1e-3)},
      {"Adam adam_w_mode wd=0.1", AdamConfig(OptimizerType::kAdam, true, 0.1)},
  };
  for (const kernels::KernelTable* k : testutil::AvailableKernels()) {
    for (const Variant& v : variants) {
      for (const Schedule& schedule : {ConstantLr(3e-3, kAdamSteps), CycledLrAndMomentum(3e-3, kAdamSteps)}) {
        const double wd = v.config.weight_decay;
        const double eps = v.config.eps;
        CompareWithTorch(
            v.name, v.config,
            [&](at::Tensor p) {
              // LibTorch 1.13's AdamWOptions defaults weight_decay to 1e-2: set all.
              return std::make_unique<torch::optim::AdamW>(std::vector<at::Tensor>{p},
                                                           torch::optim::AdamWOptions(3e-3)
                                                               .betas(std::make_tuple(0.9, 0.999))
                                                               .eps(eps)
                                                               .weight_decay(wd)
                                                               .amsgrad(false));
            },
            SetAdamHyper<torch::optim::AdamWOptions>, AdamWState, schedule, k);
      }
    }
  }
}

TEST(TorchParity, SgdMatchesTorchSgd) {
  struct Variant {
    std::string name;
    double momentum, dampening, weight_decay;
    bool nesterov;
  };
  const std::vector<Variant> variants = {
      {"plain", 0.0, 0.0, 0.0, false},    {"weight decay", 0.0, 0.0, 0.01, false},
      {"momentum", 0.9, 0.0, 0.0, false}, {"momentum+dampening", 0.9, 0.25, 0.01, false},
      {"nesterov", 0.9, 0.0, 0.01, true},
  };
  for (const Variant& v : variants) {
    OptimizerConfig c;
    c.type = OptimizerType::kSGD;
    c.momentum = v.momentum;
    c.dampening = v.dampening;
    c.weight_decay = v.weight_decay;
    c.nesterov = v.nesterov;
    std::vector<Schedule> schedules = {ConstantLr(0.05)};
    if (v.momentum != 0.0) schedules.push_back(CycledLrAndMomentum(0.05));
    for (const Schedule& schedule : schedules) {
      CompareWithTorch(
          "SGD " + v.name, c,
          [&](at::Tensor p) {
            return std::make_unique<torch::optim::SGD>(std::vector<at::Tensor>{p}, torch::optim::SGDOptions(0.05)
                                                                                       .momentum(v.momentum)
                                                                                       .dampening(v.dampening)
                                                                                       .weight_decay(v.weight_decay)
                                                                                       .nesterov(v.nesterov));
          },
          [](torch::optim::Optimizer& opt, double lr, std::optional<double> momentum) {
            auto& o = static_cast<torch::optim::SGDOptions&>(opt.param_groups()[0].options());
            o.lr(lr);
            if (momentum) o.momentum(*momentum);
          },
          [](torch::optim::OptimizerParamState& s, const std::string&) {
            return static_cast<torch::optim::SGDParamState&>(s).momentum_buffer();
          },
          schedule);
    }
  }
}

TEST(TorchParity, AdagradMatchesTorchAdagrad) {
  for (double init : {0.0, 0.1}) {
    for (double wd : {0.0, 0.01}) {
      OptimizerConfig c;
      c.type = OptimizerType::kAdagrad;
      c.eps = 1e-10;
      c.weight_decay = wd;
      c.initial_accumulator_value = init;
      CompareWithTorch(
          "Adagrad init=" + std::to_string(init) + " wd=" + std::to_string(wd), c,
          [&](at::Tensor p) {
            return std::make_unique<torch::optim::Adagrad>(
                std::vector<at::Tensor>{p},
                torch::optim::AdagradOptions(0.05).lr_decay(0.0).weight_decay(wd).initial_accumulator_value(init).eps(
                    1e-10));
          },
          [](torch::optim::Optimizer& opt, double lr, std::optional<double>) {
            static_cast<torch::optim::AdagradOptions&>(opt.param_groups()[0].options()).lr(lr);
          },
          [](torch::optim::OptimizerParamState& s, const std::string&) {
            return static_cast<torch::optim::AdagradParamState&>(s).sum();
          },
          ConstantLr(0.05));
    }
  }
}

// LibTorch has no Lion; the formula from the paper (Chen et al. 2023, Alg. 2,
// with DeepSpeed's decoupled weight decay), one tensor operation per line:
//   c = beta1 * m + (1 - beta1) * g        (in double, see ops/kernels.h)
//   p = p * (1 - lr * wd) - lr * sign(c)
//   m = beta2 * m + (1 - beta2) * g
TEST(TorchParity, LionMatchesPaperFormula) {
  for (double wd : {0.0, 0.1}) {
    SCOPED_TRACE("wd=" + std::to_string(wd));
    OptimizerConfig c;
    c.type = OptimizerType::kLion;
    c.betas = {0.9, 0.99};
    c.weight_decay = wd;
    const auto ours = MakeShardOptimizer(c, Impl::kFast);
    torch::manual_seed(5);
    torch::nn::Linear layer(37, 29);
    at::Tensor p = layer->weight.detach().clone().reshape({-1});
    at::Tensor expected_p = p.clone();
    at::Tensor expected_m = torch::zeros_like(p);
    ShardState state = ours->InitState(p);
    const Schedule schedule = CycledLrAndMomentum(1e-3);
    for (int k = 0; k < kSteps; ++k) {
      const at::Tensor g = torch::randn_like(p);
      const double lr = schedule.lr[k];
      const double beta1 = schedule.momentum[k];
      const double beta2 = 0.99;
      const at::Tensor update =
          (expected_m.to(torch::kDouble) * beta1 + g.to(torch::kDouble) * (1.0 - beta1)).sign().to(torch::kFloat);
      expected_p = expected_p * (1.0 - lr * wd) - update * lr;
      expected_m = expected_m * beta2 + g * (1.0 - beta2);

      StepHyper hyper = LrOnly(lr);
      hyper.momentum = beta1;
      ours->Step(p, g, state, hyper);
      ExpectNear(p, expected_p, "params after step " + std::to_string(k + 1));
      ExpectNear(state.tensors.at("exp_avg"), expected_m, "exp_avg after step " + std::to_string(k + 1));
    }
    // Every element moved by lr-sized sign steps: |p - p0| is about sum(lr).
    EXPECT_GT((p - layer->weight.detach().reshape({-1})).abs().mean().item<double>(), 1e-3);
  }
}

}  // namespace
}  // namespace zt::ops
