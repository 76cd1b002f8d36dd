// Adagrad on a flat fp32 shard with torch.optim.Adagrad semantics (L2 weight
// decay, initial_accumulator_value, eps added after the square root; no
// lr_decay, which DeepSpeed's Adagrad does not have either).
#include <ATen/ATen.h>

#include <cmath>

#include "ops/kernels.h"
#include "ops/optimizer_common.h"

namespace zt::ops::internal {
namespace {

void ReferenceAdagrad(float* p, const float* g, double grad_scale, float* sum, int64_t n,
                      const kernels::AdagradCoeffs& c) {
  for (int64_t i = 0; i < n; ++i) {
    const double param = p[i];
    const double grad = g[i] * grad_scale + c.weight_decay * param;
    const double s = sum[i] + grad * grad;
    sum[i] = static_cast<float>(s);
    p[i] = static_cast<float>(param - c.lr * grad / (std::sqrt(s) + c.eps));
  }
}

class AdagradOptimizer final : public ShardOptimizer {
 public:
  AdagradOptimizer(const OptimizerConfig& config, const kernels::KernelTable* kernels)
      : config_(config), kernels_(kernels) {}

  OptimizerType type() const override { return OptimizerType::kAdagrad; }

  // "sum" starts at initial_accumulator_value (zeros by default).
  ShardState InitState(const at::Tensor& params) const override {
    ShardState state;
    state.tensors["sum"] =
        at::full(params.sizes(), config_.initial_accumulator_value, params.options().dtype(at::kFloat));
    return state;
  }

  // StepHyper::momentum is ignored: Adagrad has none (DeepSpeed's OneCycle
  // disables momentum cycling for it too).
  using ShardOptimizer::Step;
  void Step(at::Tensor& params, const at::Tensor& grads, ShardState& state, const StepHyper& hyper,
            const StepExtras& extras) const override {
    CheckStepArgs("Adagrad", params, grads, hyper, extras);
    float* sum = StateTensor("Adagrad", state, "sum", params, grads, extras).data_ptr<float>();
    float* p = params.data_ptr<float>();
    state.step += 1;
    kernels::AdagradCoeffs c;
    c.lr = hyper.lr;
    c.eps = config_.eps;
    c.weight_decay = config_.weight_decay;

    const int64_t n = params.numel();
    if (kernels_ == nullptr) {
      const at::Tensor g = GradsAsFloat(grads);
      ReferenceAdagrad(p, g.data_ptr<float>(), extras.grad_scale, sum, n, c);
      WriteOutWithTorch(params, extras);
      return;
    }
    const kernels::GradIn g = GradArg(grads, extras);
    const kernels::ParamOut out = OutArg(params, extras);
    ForEachChunk(n, [&](int64_t begin, int64_t end) {
      kernels_->adagrad(p + begin, g.At(begin), sum + begin, out.At(begin), end - begin, c);
    });
  }

 private:
  OptimizerConfig config_;
  const kernels::KernelTable* kernels_;  // null: reference
};

}  // namespace

std::unique_ptr<ShardOptimizer> MakeAdagrad(const OptimizerConfig& config, const kernels::KernelTable* kernels) {
  return std::make_unique<AdagradOptimizer>(config, kernels);
}

}  // namespace zt::ops::internal
