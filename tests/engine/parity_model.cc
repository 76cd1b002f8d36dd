// Implementation of tests/engine/parity_model.h.
#include "tests/engine/parity_model.h"

#include <cmath>
#include <unordered_set>

#include "absl/strings/str_format.h"
#include "engine/lr_scheduler.h"
#include "ops/shard_optimizer.h"

namespace zt::testing {

Config ParityBaseConfig(int stage) {
  Config c;
  c.batch.train_micro_batch_size_per_gpu = 2;
  c.batch.gradient_accumulation_steps = 1;
  c.steps_per_print = 1000;
  c.optimizer.present = true;
  c.optimizer.type = OptimizerType::kAdamW;
  c.optimizer.lr = 1e-2;
  c.optimizer.weight_decay = 0.01;
  c.optimizer.adam_w_mode = true;
  c.zero.stage = stage;
  c.zero.overlap_comm = true;
  return c;
}

ParityData MakeData(int64_t rows, int64_t in_features, int64_t out_features, uint64_t seed) {
  torch::manual_seed(seed);
  ParityData d;
  d.x = torch::randn({rows, in_features});
  d.y = torch::randn({rows, out_features});
  return d;
}

int64_t MicroBatchStart(const BatchConfig& b, int64_t step, int64_t micro, int rank) {
  return step * b.train_batch + (micro * b.world_size + rank) * b.micro_batch;
}

namespace {

// One optimizer for the whole model, matching the engine's configuration.
class ReferenceOptimizer {
 public:
  ReferenceOptimizer(std::vector<torch::Tensor> params, const OptimizerConfig& c) : params_(std::move(params)) {
    switch (c.type) {
      case OptimizerType::kAdam:
      case OptimizerType::kAdamW:
        if (c.adam_w_mode) {
          torch_opt_ = std::make_unique<torch::optim::AdamW>(
              params_, torch::optim::AdamWOptions(c.lr)
                           .betas({c.betas[0], c.betas[1]})
                           .eps(c.eps)
                           .weight_decay(c.weight_decay));
        } else {
          torch_opt_ = std::make_unique<torch::optim::Adam>(
              params_, torch::optim::AdamOptions(c.lr)
                           .betas({c.betas[0], c.betas[1]})
                           .eps(c.eps)
                           .weight_decay(c.weight_decay));
        }
        break;
      case OptimizerType::kSGD:
        torch_opt_ = std::make_unique<torch::optim::SGD>(
            params_, torch::optim::SGDOptions(c.lr)
                         .momentum(c.momentum)
                         .dampening(c.dampening)
                         .nesterov(c.nesterov)
                         .weight_decay(c.weight_decay));
        break;
      case OptimizerType::kAdagrad:
        torch_opt_ = std::make_unique<torch::optim::Adagrad>(
            params_, torch::optim::AdagradOptions(c.lr)
                         .eps(c.eps)
                         .weight_decay(c.weight_decay)
                         .initial_accumulator_value(c.initial_accumulator_value));
        break;
      case OptimizerType::kLion:
        // No LibTorch Lion: the plain scalar reference over each whole tensor.
        lion_ = ops::MakeShardOptimizer(c, ops::Impl::kReference);
        for (auto& p : params_) lion_state_.push_back(lion_->InitState(p.detach()));
        break;
    }
  }

  void Step(double lr, std::optional<double> momentum, std::optional<double> beta2) {
    if (lion_) {
      torch::NoGradGuard ng;
      for (size_t i = 0; i < params_.size(); ++i) {
        if (!params_[i].grad().defined()) continue;
        torch::Tensor p = params_[i].detach();
        torch::Tensor flat = p.view({-1});
        ops::StepHyper h;
        h.lr = lr;
        h.momentum = momentum;
        h.beta2 = beta2;
        lion_->Step(flat, params_[i].grad().contiguous().view({-1}), lion_state_[i], h);
      }
      return;
    }
    for (auto& group : torch_opt_->param_groups()) {
      auto& o = group.options();
      o.set_lr(lr);
      if (momentum) {
        if (auto* a = dynamic_cast<torch::optim::AdamWOptions*>(&o)) {
          a->betas({*momentum, beta2.value_or(std::get<1>(a->betas()))});
        } else if (auto* b = dynamic_cast<torch::optim::AdamOptions*>(&o)) {
          b->betas({*momentum, beta2.value_or(std::get<1>(b->betas()))});
        }
      }
    }
    torch_opt_->step();
  }

  void ZeroGrad() {
    for (auto& p : params_) {
      if (p.grad().defined()) p.mutable_grad().zero_();
    }
  }

 private:
  std::vector<torch::Tensor> params_;
  std::unique_ptr<torch::optim::Optimizer> torch_opt_;
  std::unique_ptr<ops::ShardOptimizer> lion_;
  std::vector<ops::ShardState> lion_state_;
};

}  // namespace

void TrainReference(torch::nn::Module& model, const std::function<torch::Tensor(const torch::Tensor&)>& forward,
                    const ParityData& data, const Config& config, int64_t steps) {
  const bool bf16 = config.bf16.enabled;
  TrainReferenceWithLoss(
      model,
      [&](const torch::Tensor& x, const torch::Tensor& y) {
        return torch::mse_loss(forward(bf16 ? x.to(torch::kBFloat16) : x).to(torch::kFloat), y);
      },
      data, config, steps);
}

void TrainReferenceWithLoss(torch::nn::Module& model,
                            const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>& loss_fn,
                            const ParityData& data, const Config& config, int64_t steps,
                            const std::function<void(int64_t)>& after_step) {
  const bool bf16 = config.bf16.enabled;
  if (bf16) model.to(torch::kBFloat16);
  // Each parameter once, even when tied (registered under several names).
  std::vector<torch::Tensor> model_params;
  std::unordered_set<const void*> seen;
  for (const torch::Tensor& p : model.parameters()) {
    if (seen.insert(p.unsafeGetTensorImpl()).second) model_params.push_back(p);
  }
  std::vector<torch::Tensor> opt_params;
  if (bf16) {
    for (auto& p : model_params) {
      opt_params.push_back(p.detach().to(torch::kFloat).clone().set_requires_grad(p.requires_grad()));
    }
  } else {
    opt_params = model_params;
  }
  ReferenceOptimizer opt(opt_params, config.optimizer);
  std::unique_ptr<LrScheduler> sched = MakeLrScheduler(config.scheduler, config.optimizer.lr);
  const int64_t batch = config.batch.train_batch;
  for (int64_t s = 0; s < steps; ++s) {
    torch::Tensor x = data.x.narrow(0, s * batch, batch);
    torch::Tensor y = data.y.narrow(0, s * batch, batch);
    torch::Tensor loss = loss_fn(x, y);
    for (auto& p : model_params) {
      if (p.grad().defined()) p.mutable_grad().zero_();
    }
    loss.backward();
    if (bf16) {
      for (size_t i = 0; i < model_params.size(); ++i) {
        if (model_params[i].grad().defined()) opt_params[i].mutable_grad() = model_params[i].grad().to(torch::kFloat);
      }
    }
    if (config.gradient_clipping > 0) torch::nn::utils::clip_grad_norm_(opt_params, config.gradient_clipping);
    const OptimizerType t = config.optimizer.type;
    const bool has_betas = t == OptimizerType::kAdam || t == OptimizerType::kAdamW || t == OptimizerType::kLion;
    opt.Step(sched->Lr(s), has_betas ? sched->Momentum(s) : std::nullopt,
             has_betas ? sched->Beta2(s) : std::nullopt);
    if (bf16) {
      torch::NoGradGuard ng;
      for (size_t i = 0; i < model_params.size(); ++i) {
        if (model_params[i].requires_grad()) model_params[i].copy_(opt_params[i]);
      }
    }
    if (after_step) after_step(s);
  }
}

std::string CompareParams(torch::nn::Module& a, torch::nn::Module& b, double rtol, double atol) {
  auto pa = a.named_parameters();
  auto pb = b.named_parameters();
  if (pa.size() != pb.size()) return "different parameter counts";
  double worst = 0.0;
  std::string worst_msg;
  for (const auto& item : pa) {
    torch::Tensor x = item.value().detach().to(torch::kDouble);
    torch::Tensor y = pb[item.key()].detach().to(torch::kDouble);
    torch::Tensor excess = (x - y).abs() - (atol + rtol * y.abs());
    const double e = excess.max().item<double>();
    if (e > worst) {
      worst = e;
      const int64_t i = excess.flatten().argmax().item<int64_t>();
      worst_msg = absl::StrFormat("%s[%d]: engine %.9g vs reference %.9g (max |diff| %.3g)", item.key(), i,
                                  x.flatten()[i].item<double>(), y.flatten()[i].item<double>(),
                                  (x - y).abs().max().item<double>());
    }
  }
  return worst_msg;
}

}  // namespace zt::testing
