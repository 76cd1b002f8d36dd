// Adagrad on a flat fp32 shard with torch.optim.Adagrad semantics (L2 weight
// decay, initial_accumulator_value, eps added after the square root; no
// lr_decay, which DeepSpeed's Adagrad does not have either).
#include <cmath>

#include <ATen/ATen.h>

#include "ops/kernels.h"
#include "ops/optimizer_common.h"

namespace zt::ops::internal {
namespace {

void ReferenceAdagrad(float* p, const float* g, float* sum, int64_t n,
                      const kernels::AdagradCoeffs& c) {
  for (int64_t i = 0; i < n; ++i) {
    const double param = p[i];
    const double grad = g[i] + c.weight_decay * param;
    const double s = sum[i] + grad * grad;
    sum[i] = static_cast<float>(s);
    p[i] = static_cast<float>(param - c.lr * grad / (std::sqrt(s) + c.eps));
  }
}

class AdagradOptimizer final : public ShardOptimizer {
 public:
  AdagradOptimizer(const OptimizerConfig& config, Impl impl) : config_(config), impl_(impl) {}

  OptimizerType type() const override { return OptimizerType::kAdagrad; }

  // "sum" starts at initial_accumulator_value (zeros by default).
  ShardState InitState(const at::Tensor& params) const override {
    ShardState state;
    state.tensors["sum"] = at::full(params.sizes(), config_.initial_accumulator_value,
                                    params.options().dtype(at::kFloat));
    return state;
  }

  // StepHyper::momentum is ignored: Adagrad has none (DeepSpeed's OneCycle
  // disables momentum cycling for it too).
  void Step(at::Tensor& params, const at::Tensor& grads, ShardState& state,
            const StepHyper& hyper) const override {
    CheckStepArgs("Adagrad", params, grads, hyper);
    float* sum = StateTensor("Adagrad", state, "sum", params).data_ptr<float>();
    float* p = params.data_ptr<float>();
    const float* g = grads.data_ptr<float>();
    state.step += 1;
    kernels::AdagradCoeffs c;
    c.lr = hyper.lr;
    c.eps = config_.eps;
    c.weight_decay = config_.weight_decay;

    const int64_t n = params.numel();
    if (impl_ == Impl::kReference) {
      ReferenceAdagrad(p, g, sum, n, c);
      return;
    }
    ForEachChunk(n, [&](int64_t begin, int64_t end) {
      kernels::AdagradStep(p + begin, g + begin, sum + begin, end - begin, c);
    });
  }

 private:
  OptimizerConfig config_;
  Impl impl_;
};

}  // namespace

std::unique_ptr<ShardOptimizer> MakeAdagrad(const OptimizerConfig& config, Impl impl) {
  return std::make_unique<AdagradOptimizer>(config, impl);
}

}  // namespace zt::ops::internal
