// Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms") on
// a flat fp32 shard, as DeepSpeed's FusedLion / CPU Lion compute it: sign of
// an interpolated momentum, decoupled weight decay, no bias correction.
#include "ops/kernels.h"
#include "ops/optimizer_common.h"

namespace zt::ops::internal {
namespace {

// All in double, the gradient scale included. The fast kernel scales in
// float, so where the sign's argument is within a float rounding of zero the
// two may take opposite signs (p then differs by 2 lr); with scale 1 they
// agree exactly.
void ReferenceLion(float* p, const float* g, double grad_scale, float* m, int64_t n, const kernels::LionCoeffs& c) {
  for (int64_t i = 0; i < n; ++i) {
    const double param = p[i];
    const double grad = g[i] * grad_scale;
    const double exp_avg = m[i];
    const double u = c.beta1 * exp_avg + (1.0 - c.beta1) * grad;
    const double sign = u > 0.0 ? 1.0 : (u < 0.0 ? -1.0 : 0.0);
    p[i] = static_cast<float>(param * (1.0 - c.lr * c.weight_decay) - c.lr * sign);
    m[i] = static_cast<float>(c.beta2 * exp_avg + (1.0 - c.beta2) * grad);
  }
}

// The split update's first pass: the state as above and the increment
// lr * sign, exact in float, where the gradient was.
void ReferenceLionMoments(float* g_inc, double grad_scale, float* m, int64_t n, const kernels::LionCoeffs& c) {
  for (int64_t i = 0; i < n; ++i) {
    const double grad = g_inc[i] * grad_scale;
    const double exp_avg = m[i];
    const double u = c.beta1 * exp_avg + (1.0 - c.beta1) * grad;
    const double sign = u > 0.0 ? 1.0 : (u < 0.0 ? -1.0 : 0.0);
    m[i] = static_cast<float>(c.beta2 * exp_avg + (1.0 - c.beta2) * grad);
    g_inc[i] = static_cast<float>(c.lr * sign);
  }
}

class LionOptimizer final : public ShardOptimizer {
 public:
  LionOptimizer(const OptimizerConfig& config, const kernels::KernelTable* kernels)
      : config_(config), kernels_(kernels) {}

  OptimizerType type() const override { return OptimizerType::kLion; }

  ShardState InitState(const at::Tensor& params) const override {
    ShardState state;
    state.tensors["exp_avg"] = ZerosLikeParams(params);
    return state;
  }

  using ShardOptimizer::Step;
  void Step(at::Tensor& params, const at::Tensor& grads, ShardState& state, const StepHyper& hyper,
            const StepExtras& extras) const override {
    CheckStepArgs("Lion", params, grads, hyper, extras);
    float* m = StateTensor("Lion", state, "exp_avg", params, grads, extras).data_ptr<float>();
    float* p = params.data_ptr<float>();
    state.step += 1;
    const kernels::LionCoeffs c = Coeffs(hyper);

    const int64_t n = params.numel();
    if (kernels_ == nullptr) {
      const at::Tensor g = GradsAsFloat(grads);
      ReferenceLion(p, g.data_ptr<float>(), extras.grad_scale, m, n, c);
      WriteOutWithTorch(params, extras);
      return;
    }
    const kernels::GradIn g = GradArg(grads, extras);
    const kernels::ParamOut out = OutArg(params, extras);
    ForEachChunk(n, [&](int64_t begin, int64_t end) {
      kernels_->lion(p + begin, g.At(begin), m + begin, out.At(begin), end - begin, c);
    });
  }

  bool SplitsUpdate() const override { return true; }

  void StepMoments(at::Tensor& grads, ShardState& state, const StepHyper& hyper, double grad_scale) const override {
    CheckMomentsArgs("Lion", grads, hyper, grad_scale);
    float* m = StateTensor("Lion", state, "exp_avg", grads, grads, StepExtras()).data_ptr<float>();
    float* g = grads.data_ptr<float>();
    state.step += 1;
    const kernels::LionCoeffs c = Coeffs(hyper);
    const int64_t n = grads.numel();
    if (kernels_ == nullptr) {
      ReferenceLionMoments(g, grad_scale, m, n, c);
      return;
    }
    ForEachChunk(n, [&](int64_t begin, int64_t end) {
      kernels_->lion_moments(g + begin, grad_scale, m + begin, end - begin, c);
    });
  }

  void ApplyIncrement(at::Tensor& params, const at::Tensor& increment, const StepHyper& hyper) const override {
    ApplyIncrementWith(kernels_, "Lion", params, increment, hyper, config_.weight_decay);
  }

 private:
  kernels::LionCoeffs Coeffs(const StepHyper& hyper) const {
    kernels::LionCoeffs c;
    c.lr = hyper.lr;
    c.beta1 = hyper.momentum.value_or(config_.betas[0]);
    c.beta2 = hyper.beta2.value_or(config_.betas[1]);
    c.weight_decay = config_.weight_decay;
    return c;
  }

  OptimizerConfig config_;
  const kernels::KernelTable* kernels_;  // null: reference
};

}  // namespace

std::unique_ptr<ShardOptimizer> MakeLion(const OptimizerConfig& config, const kernels::KernelTable* kernels) {
  return std::make_unique<LionOptimizer>(config, kernels);
}

}  // namespace zt::ops::internal
