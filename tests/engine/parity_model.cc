// Implementation of tests/engine/parity_model.h.
#include "tests/engine/parity_model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_format.h"
#include "schedule/lr_scheduler.h"
#include "tests/testing/test_config.h"
#include "util/error.h"

namespace zt::testing {

Config ParityBaseConfig(int stage) {
  Config c = TestConfig(stage, /*micro_batch=*/2, /*accumulation=*/1, OptimizerType::kAdamW, 1e-2);
  c.optimizer.weight_decay = 0.01;
  c.optimizer.adam_w_mode = true;
  c.zero.overlap_comm = true;
  return c;
}

std::string ParityVariantsToRun(const std::string& fallback) {
  const char* names = std::getenv("ZT_PARITY_VARIANTS");
  return names != nullptr && *names != '\0' ? std::string(names) : fallback;
}

std::chrono::seconds ParityLaunchTimeout(size_t count) { return std::chrono::seconds(120 + 60 * count); }

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

// One optimizer for the whole model, matching the engine's configuration:
// one LibTorch param group per resolved group (config/param_groups.h).
class ReferenceOptimizer {
 public:
  ReferenceOptimizer(std::vector<torch::Tensor> params, const ResolvedParamGroups& groups)
      : params_(std::move(params)), groups_(groups) {
    const OptimizerConfig& c0 = groups.configs.front();
    if (c0.type == OptimizerType::kLion) {
      // No LibTorch Lion: plain tensor ops in the parameters' dtype.
      for (auto& p : params_) lion_m_.push_back(torch::zeros_like(p.detach()));
      return;
    }
    std::vector<torch::optim::OptimizerParamGroup> torch_groups;
    for (size_t k = 0; k < groups.size(); ++k) {
      std::vector<torch::Tensor> members;
      for (size_t i = 0; i < params_.size(); ++i) {
        if (groups.group_of[i] == static_cast<int>(k)) members.push_back(params_[i]);
      }
      torch_groups.emplace_back(members, Options(groups.configs[k]));
    }
    switch (c0.type) {
      case OptimizerType::kAdam:
      case OptimizerType::kAdamW:
        if (c0.adam_w_mode) {
          torch_opt_ = std::make_unique<torch::optim::AdamW>(torch_groups, AdamW(c0));
        } else {
          torch_opt_ = std::make_unique<torch::optim::Adam>(torch_groups, Adam(c0));
        }
        break;
      case OptimizerType::kSGD: torch_opt_ = std::make_unique<torch::optim::SGD>(torch_groups, Sgd(c0)); break;
      case OptimizerType::kAdagrad:
        torch_opt_ = std::make_unique<torch::optim::Adagrad>(torch_groups, Adagrad(c0));
        break;
      case OptimizerType::kLion: break;
    }
  }

  void Step(double lr, std::optional<double> momentum, std::optional<double> beta2) {
    if (!torch_opt_) {
      // Chen et al. 2023: the sign of an interpolated momentum, decoupled
      // weight decay, no bias correction (DeepSpeed's Lion).
      torch::NoGradGuard ng;
      for (size_t i = 0; i < params_.size(); ++i) {
        if (!params_[i].grad().defined()) continue;
        const size_t k = static_cast<size_t>(groups_.group_of[i]);
        const OptimizerConfig& c = groups_.configs[k];
        const double glr = groups_.lr[k].value_or(lr);
        const double b1 = momentum.value_or(c.betas[0]);
        const double b2 = beta2.value_or(c.betas[1]);
        torch::Tensor p = params_[i].detach();
        const torch::Tensor g = params_[i].grad();
        torch::Tensor& m = lion_m_[i];
        const torch::Tensor u = m * b1 + g * (1.0 - b1);
        p.mul_(1.0 - glr * c.weight_decay).sub_(u.sign() * glr);
        m.mul_(b2).add_(g, 1.0 - b2);
      }
      return;
    }
    auto& torch_groups = torch_opt_->param_groups();
    for (size_t k = 0; k < torch_groups.size(); ++k) {
      auto& o = torch_groups[k].options();
      o.set_lr(groups_.lr[k].value_or(lr));
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
  static torch::optim::AdamWOptions AdamW(const OptimizerConfig& c) {
    return torch::optim::AdamWOptions(c.lr).betas({c.betas[0], c.betas[1]}).eps(c.eps).weight_decay(c.weight_decay);
  }
  static torch::optim::AdamOptions Adam(const OptimizerConfig& c) {
    return torch::optim::AdamOptions(c.lr).betas({c.betas[0], c.betas[1]}).eps(c.eps).weight_decay(c.weight_decay);
  }
  static torch::optim::SGDOptions Sgd(const OptimizerConfig& c) {
    return torch::optim::SGDOptions(c.lr)
        .momentum(c.momentum)
        .dampening(c.dampening)
        .nesterov(c.nesterov)
        .weight_decay(c.weight_decay);
  }
  static torch::optim::AdagradOptions Adagrad(const OptimizerConfig& c) {
    return torch::optim::AdagradOptions(c.lr)
        .eps(c.eps)
        .weight_decay(c.weight_decay)
        .initial_accumulator_value(c.initial_accumulator_value);
  }
  // A group's own options (LibTorch keeps them per param group).
  static std::unique_ptr<torch::optim::OptimizerOptions> Options(const OptimizerConfig& c) {
    switch (c.type) {
      case OptimizerType::kAdam:
      case OptimizerType::kAdamW:
        if (c.adam_w_mode) return std::make_unique<torch::optim::AdamWOptions>(AdamW(c));
        return std::make_unique<torch::optim::AdamOptions>(Adam(c));
      case OptimizerType::kSGD: return std::make_unique<torch::optim::SGDOptions>(Sgd(c));
      case OptimizerType::kAdagrad: return std::make_unique<torch::optim::AdagradOptions>(Adagrad(c));
      case OptimizerType::kLion: break;
    }
    return nullptr;
  }

  std::vector<torch::Tensor> params_;
  ResolvedParamGroups groups_;
  std::unique_ptr<torch::optim::Optimizer> torch_opt_;
  std::vector<torch::Tensor> lion_m_;
};

}  // namespace

void TrainReference(torch::nn::Module& model, const std::function<torch::Tensor(const torch::Tensor&)>& forward,
                    const ParityData& data, const Config& config, int64_t steps, RefArith arith,
                    const std::vector<ParamGroupOptions>& groups) {
  const bool f64 = arith == RefArith::kFloat64;
  const torch::Dtype input = f64 ? torch::kDouble : config.bf16.enabled ? torch::kBFloat16 : torch::kFloat;
  const torch::Dtype loss = f64 ? torch::kDouble : torch::kFloat;
  TrainReferenceWithLoss(
      model,
      [&](const torch::Tensor& x, const torch::Tensor& y) {
        return torch::mse_loss(forward(x.to(input)).to(loss), y.to(loss));
      },
      data, config, steps, nullptr, arith, groups);
}

void TrainReferenceWithLoss(torch::nn::Module& model,
                            const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>& loss_fn,
                            const ParityData& data, const Config& config, int64_t steps,
                            const std::function<void(int64_t)>& after_step, RefArith arith,
                            const std::vector<ParamGroupOptions>& groups) {
  const bool f64 = arith == RefArith::kFloat64;
  const bool bf16 = config.bf16.enabled && !f64;
  if (f64) model.to(torch::kDouble);
  if (bf16) model.to(torch::kBFloat16);
  // Each parameter once, even when tied (registered under several names).
  std::vector<torch::Tensor> model_params;
  std::vector<std::string> trainable;  // names, for the param groups
  std::map<std::string, int> names;
  std::unordered_map<const void*, int> index_of;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const torch::Tensor& p = item.value();
    auto [it, fresh] = index_of.emplace(p.unsafeGetTensorImpl(), static_cast<int>(model_params.size()));
    if (fresh) {
      model_params.push_back(p);
      trainable.push_back(item.key());
    }
    names[item.key()] = it->second;
  }
  // Frozen parameters (no gradient) sit in whichever group: LibTorch skips them.
  const ResolvedParamGroups resolved = ValueOrThrow(
      ResolveParamGroups(groups, names, trainable, config.optimizer, config.scheduler.type != SchedulerType::kNone));
  std::vector<torch::Tensor> opt_params;
  if (bf16) {
    for (auto& p : model_params) {
      opt_params.push_back(p.detach().to(torch::kFloat).clone().set_requires_grad(p.requires_grad()));
    }
  } else {
    opt_params = model_params;
  }
  ReferenceOptimizer opt(opt_params, resolved);
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
    opt.Step(sched->Lr(s), has_betas ? sched->Momentum(s) : std::nullopt, has_betas ? sched->Beta2(s) : std::nullopt);
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

TruthComparison CompareWithTruth(torch::nn::Module& engine, torch::nn::Module& reference, torch::nn::Module& truth,
                                 const TruthTolerance& tolerance) {
  TruthComparison c;
  auto pe = engine.named_parameters();
  auto pr = reference.named_parameters();
  auto pt = truth.named_parameters();
  if (pe.size() != pt.size() || pr.size() != pt.size()) {
    c.failure = "different parameter counts";
    return c;
  }
  double worst_excess = 0.0;
  for (const auto& item : pt) {
    const std::string& name = item.key();
    const torch::Tensor t = item.value().detach().to(torch::kDouble);
    const torch::Tensor de = (pe[name].detach().to(torch::kDouble) - t).abs();
    const double e = de.max().item<double>();
    const torch::Tensor ref = pr[name].detach().to(torch::kDouble);
    const double r = (ref - t).abs().max().item<double>();
    c.engine_vs_reference =
        std::max(c.engine_vs_reference, (pe[name].detach().to(torch::kDouble) - ref).abs().max().item<double>());
    const double scale = t.abs().max().item<double>();
    const double bound = tolerance.multiple * r + tolerance.floor * scale;
    c.engine_error = std::max(c.engine_error, e);
    c.reference_error = std::max(c.reference_error, r);
    const double margin = bound > 0 ? e / bound : (e > 0 ? std::numeric_limits<double>::infinity() : 0.0);
    if (margin > c.worst_margin || c.worst_param.empty()) {
      c.worst_margin = margin;
      c.worst_param = name;
    }
    if (e > bound && e - bound > worst_excess) {
      worst_excess = e - bound;
      const int64_t i = de.flatten().argmax().item<int64_t>();
      c.failure = absl::StrFormat(
          "%s[%d]: engine %.9g, float64 truth %.9g: engine off by %.3g, the plain reference by at most %.3g "
          "(bound %g x that + %g x max|truth| %.3g = %.3g)",
          name, i, pe[name].detach().flatten()[i].item<double>(), t.flatten()[i].item<double>(), e, r,
          tolerance.multiple, tolerance.floor, scale, bound);
    }
  }
  return c;
}

void RecordTruthStats(const std::string& where, const TruthComparison& c) {
  const char* path = std::getenv("ZT_PARITY_STATS");
  if (path == nullptr || *path == '\0') return;
  std::ofstream out(path, std::ios::app);
  out << absl::StrFormat("%s\tmargin %.3f (%s)\tengine %.3g\treference %.3g\tengine-reference %.3g\t%s\n", where,
                         c.worst_margin, c.worst_param, c.engine_error, c.reference_error, c.engine_vs_reference,
                         c.failure.empty() ? "ok" : "FAIL");
}

}  // namespace zt::testing
