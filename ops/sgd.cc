// SGD on a flat fp32 shard with torch.optim.SGD semantics: L2 weight decay,
// momentum with dampening, Nesterov; the momentum buffer starts as a copy of
// the first gradient it sees, as in torch.
#include "ops/kernels.h"
#include "ops/optimizer_common.h"

namespace zt::ops::internal {
namespace {

constexpr const char* kBuffer = "momentum_buffer";

void ReferenceSgd(float* p, const float* g, double grad_scale, float* buf, int64_t n, const kernels::SgdCoeffs& c) {
  for (int64_t i = 0; i < n; ++i) {
    const double param = p[i];
    double d = g[i] * grad_scale + c.weight_decay * param;
    if (c.momentum != 0.0) {
      const double b = c.first_step ? d : c.momentum * buf[i] + (1.0 - c.dampening) * d;
      buf[i] = static_cast<float>(b);
      d = c.nesterov ? d + c.momentum * b : b;
    }
    p[i] = static_cast<float>(param - c.lr * d);
  }
}

class SgdOptimizer final : public ShardOptimizer {
 public:
  SgdOptimizer(const OptimizerConfig& config, const kernels::KernelTable* kernels)
      : config_(config), kernels_(kernels) {}

  OptimizerType type() const override { return OptimizerType::kSGD; }

  // Plain SGD (momentum 0) keeps no state. A schedule that cycles momentum
  // (StepHyper::momentum) on an optimizer configured without it gets its
  // buffer on the first such step, as torch creates it lazily.
  ShardState InitState(const at::Tensor& params) const override {
    ShardState state;
    if (config_.momentum != 0.0) state.tensors[kBuffer] = ZerosLikeParams(params);
    return state;
  }

  using ShardOptimizer::Step;
  void Step(at::Tensor& params, const at::Tensor& grads, ShardState& state, const StepHyper& hyper,
            const StepExtras& extras) const override {
    CheckStepArgs("SGD", params, grads, hyper, extras);
    kernels::SgdCoeffs c;
    c.lr = hyper.lr;
    c.weight_decay = config_.weight_decay;
    c.momentum = hyper.momentum.value_or(config_.momentum);
    c.dampening = config_.dampening;
    c.nesterov = config_.nesterov;

    float* buf = nullptr;
    if (c.momentum != 0.0) {
      // torch initialises the buffer from the gradient the first time it
      // updates it: on the first step, or when the buffer does not exist yet.
      c.first_step = state.step == 0;
      if (state.tensors.count(kBuffer) == 0) {
        state.tensors[kBuffer] = ZerosLikeParams(params);
        c.first_step = true;
      }
      buf = StateTensor("SGD", state, kBuffer, params, grads, extras).data_ptr<float>();
    }
    float* p = params.data_ptr<float>();
    state.step += 1;

    const int64_t n = params.numel();
    if (kernels_ == nullptr) {
      const at::Tensor g = GradsAsFloat(grads);
      ReferenceSgd(p, g.data_ptr<float>(), extras.grad_scale, buf, n, c);
      WriteOutWithTorch(params, extras);
      return;
    }
    const kernels::GradIn g = GradArg(grads, extras);
    const kernels::ParamOut out = OutArg(params, extras);
    ForEachChunk(n, [&](int64_t begin, int64_t end) {
      kernels_->sgd(p + begin, g.At(begin), buf == nullptr ? nullptr : buf + begin, out.At(begin), end - begin, c);
    });
  }

 private:
  OptimizerConfig config_;
  const kernels::KernelTable* kernels_;  // null: reference
};

}  // namespace

std::unique_ptr<ShardOptimizer> MakeSgd(const OptimizerConfig& config, const kernels::KernelTable* kernels) {
  return std::make_unique<SgdOptimizer>(config, kernels);
}

}  // namespace zt::ops::internal
