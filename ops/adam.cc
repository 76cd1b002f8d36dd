// Adam and AdamW on a flat fp32 shard, with DeepSpeed's adam_w_mode meaning:
// decoupled weight decay (AdamW) for type AdamW, and for type Adam unless
// adam_w_mode is false (then L2 decay folded into the gradient, torch.optim.Adam).
#include <cmath>

#include "ops/kernels.h"
#include "ops/optimizer_common.h"

namespace zt::ops::internal {
namespace {

// The textbook update in double per element, straight from torch.optim's
// documentation; the fast kernel must agree with it. `g` is fp32 and scaled
// here, in double.
void ReferenceAdam(float* p, const float* g, double grad_scale, float* m, float* v, int64_t n,
                   const kernels::AdamCoeffs& c) {
  for (int64_t i = 0; i < n; ++i) {
    double param = p[i];
    double grad = g[i] * grad_scale;
    if (c.decoupled) {
      param *= 1.0 - c.lr * c.weight_decay;
    } else {
      grad += c.weight_decay * param;
    }
    const double exp_avg = c.beta1 * m[i] + (1.0 - c.beta1) * grad;
    const double exp_avg_sq = c.beta2 * v[i] + (1.0 - c.beta2) * grad * grad;
    const double denom = std::sqrt(exp_avg_sq) / std::sqrt(c.bias_correction2) + c.eps;
    param -= (c.lr / c.bias_correction1) * exp_avg / denom;
    m[i] = static_cast<float>(exp_avg);
    v[i] = static_cast<float>(exp_avg_sq);
    p[i] = static_cast<float>(param);
  }
}

// The split update's first pass (decoupled decay): the state as above and
// the increment (lr / bias_correction1) * exp_avg / denom, rounded to float
// once, where the gradient was.
void ReferenceAdamMoments(float* g_inc, double grad_scale, float* m, float* v, int64_t n,
                          const kernels::AdamCoeffs& c) {
  for (int64_t i = 0; i < n; ++i) {
    const double grad = g_inc[i] * grad_scale;
    const double exp_avg = c.beta1 * m[i] + (1.0 - c.beta1) * grad;
    const double exp_avg_sq = c.beta2 * v[i] + (1.0 - c.beta2) * grad * grad;
    const double denom = std::sqrt(exp_avg_sq) / std::sqrt(c.bias_correction2) + c.eps;
    m[i] = static_cast<float>(exp_avg);
    v[i] = static_cast<float>(exp_avg_sq);
    g_inc[i] = static_cast<float>((c.lr / c.bias_correction1) * exp_avg / denom);
  }
}

class AdamOptimizer final : public ShardOptimizer {
 public:
  AdamOptimizer(const OptimizerConfig& config, const kernels::KernelTable* kernels)
      : config_(config), kernels_(kernels), decoupled_(config.type == OptimizerType::kAdamW || config.adam_w_mode) {}

  OptimizerType type() const override { return config_.type; }

  ShardState InitState(const at::Tensor& params) const override {
    ShardState state;
    state.tensors["exp_avg"] = ZerosLikeParams(params);
    state.tensors["exp_avg_sq"] = ZerosLikeParams(params);
    return state;
  }

  using ShardOptimizer::Step;
  void Step(at::Tensor& params, const at::Tensor& grads, ShardState& state, const StepHyper& hyper,
            const StepExtras& extras) const override {
    const char* name = OptimizerName(config_.type);
    CheckStepArgs(name, params, grads, hyper, extras);
    float* m = StateTensor(name, state, "exp_avg", params, grads, extras).data_ptr<float>();
    float* v = StateTensor(name, state, "exp_avg_sq", params, grads, extras).data_ptr<float>();
    float* p = params.data_ptr<float>();

    state.step += 1;
    const kernels::AdamCoeffs c = Coeffs(hyper, state.step);
    const int64_t n = params.numel();
    if (kernels_ == nullptr) {
      const at::Tensor g = GradsAsFloat(grads);
      ReferenceAdam(p, g.data_ptr<float>(), extras.grad_scale, m, v, n, c);
      WriteOutWithTorch(params, extras);
      return;
    }
    const kernels::GradIn g = GradArg(grads, extras);
    const kernels::ParamOut out = OutArg(params, extras);
    ForEachChunk(n, [&](int64_t begin, int64_t end) {
      kernels_->adam(p + begin, g.At(begin), m + begin, v + begin, out.At(begin), end - begin, c);
    });
  }

  bool SplitsUpdate() const override { return decoupled_; }

  void StepMoments(at::Tensor& grads, ShardState& state, const StepHyper& hyper, double grad_scale) const override {
    if (!decoupled_) ShardOptimizer::StepMoments(grads, state, hyper, grad_scale);  // throws
    const char* name = OptimizerName(config_.type);
    CheckMomentsArgs(name, grads, hyper, grad_scale);
    const StepExtras none;
    float* m = StateTensor(name, state, "exp_avg", grads, grads, none).data_ptr<float>();
    float* v = StateTensor(name, state, "exp_avg_sq", grads, grads, none).data_ptr<float>();
    float* g = grads.data_ptr<float>();
    state.step += 1;
    const kernels::AdamCoeffs c = Coeffs(hyper, state.step);
    const int64_t n = grads.numel();
    if (kernels_ == nullptr) {
      ReferenceAdamMoments(g, grad_scale, m, v, n, c);
      return;
    }
    ForEachChunk(n, [&](int64_t begin, int64_t end) {
      kernels_->adam_moments(g + begin, grad_scale, m + begin, v + begin, end - begin, c);
    });
  }

  void ApplyIncrement(at::Tensor& params, const at::Tensor& increment, const StepHyper& hyper) const override {
    if (!decoupled_) ShardOptimizer::ApplyIncrement(params, increment, hyper);  // throws
    ApplyIncrementWith(kernels_, OptimizerName(config_.type), params, increment, hyper, config_.weight_decay);
  }

 private:
  // The coefficients of the step that makes the state's count `step`.
  kernels::AdamCoeffs Coeffs(const StepHyper& hyper, int64_t step) const {
    kernels::AdamCoeffs c;
    c.lr = hyper.lr;
    c.beta1 = hyper.momentum.value_or(config_.betas[0]);
    c.beta2 = hyper.beta2.value_or(config_.betas[1]);
    c.eps = config_.eps;
    c.weight_decay = config_.weight_decay;
    c.decoupled = decoupled_;
    if (config_.bias_correction) {
      // With a cycled beta1 this uses the current beta, like torch.optim and
      // DeepSpeed's CPU Adam (they recompute beta^step from the group's betas).
      const double t = static_cast<double>(step);
      c.bias_correction1 = 1.0 - std::pow(c.beta1, t);
      c.bias_correction2 = 1.0 - std::pow(c.beta2, t);
    }
    return c;
  }

  OptimizerConfig config_;
  const kernels::KernelTable* kernels_;  // null: reference
  bool decoupled_;
};

}  // namespace

std::unique_ptr<ShardOptimizer> MakeAdam(const OptimizerConfig& config, const kernels::KernelTable* kernels) {
  return std::make_unique<AdamOptimizer>(config, kernels);
}

}  // namespace zt::ops::internal
