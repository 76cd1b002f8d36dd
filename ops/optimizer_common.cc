// Shared argument checks and helpers for the shard optimizers
// (ops/optimizer_common.h).
#include "ops/optimizer_common.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "util/error.h"

namespace zt::ops::internal {
namespace {

std::string Describe(const at::Tensor& t) {
  return absl::StrCat(std::string(c10::toString(t.scalar_type())), " ", t.device().str(),
                      t.is_contiguous() ? "" : " non-contiguous", " tensor of ", t.numel(), " elements");
}

bool IsFlatCpu(const at::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.is_contiguous() && t.layout() == at::kStrided;
}

bool IsFlatFloatCpu(const at::Tensor& t) { return IsFlatCpu(t) && t.scalar_type() == at::kFloat; }

bool IsKernelDType(at::ScalarType dtype) { return dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf; }

kernels::DType KernelDType(at::ScalarType dtype) {
  switch (dtype) {
    case at::kBFloat16: return kernels::DType::kBFloat16;
    case at::kHalf: return kernels::DType::kFloat16;
    default: return kernels::DType::kFloat32;
  }
}

// Whether the bytes of `a` and `b` intersect (empty tensors never do).
bool Overlap(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0) return false;
  const auto* a0 = static_cast<const char*>(a.data_ptr());
  const auto* b0 = static_cast<const char*>(b.data_ptr());
  return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

// extras.out is params itself: the update writes it, nothing else to do.
bool OutIsParams(const at::Tensor& params, const StepExtras& extras) {
  return extras.out.defined() && extras.out.scalar_type() == at::kFloat && extras.out.data_ptr() == params.data_ptr();
}

void CheckUnitInterval(const char* optimizer, const char* what, double value) {
  if (!(value >= 0.0 && value < 1.0)) {
    throw Error(absl::InvalidArgumentError(
        absl::StrCat(optimizer, " step: ", what, " = ", value, " is outside [0, 1); check the scheduler")));
  }
}

void CheckOut(const char* optimizer, const at::Tensor& params, const at::Tensor& grads, const StepExtras& extras) {
  const at::Tensor& out = extras.out;
  if (!out.defined()) return;
  if (!IsFlatCpu(out) || !IsKernelDType(out.scalar_type())) {
    throw Error(absl::InvalidArgumentError(
        absl::StrCat(optimizer,
                     " step: extras.out must be a contiguous float32, bfloat16 or float16 CPU "
                     "tensor (the model's own copy of the parameters); got a ",
                     Describe(out))));
  }
  if (out.numel() != params.numel()) {
    throw Error(absl::InvalidArgumentError(absl::StrCat(optimizer, " step: extras.out has ", out.numel(),
                                                        " elements but params has ", params.numel(),
                                                        "; both must be the same shard")));
  }
  if (OutIsParams(params, extras)) return;
  if (Overlap(out, params) || Overlap(out, grads)) {
    throw Error(absl::InvalidArgumentError(
        absl::StrCat(optimizer, " step: extras.out overlaps ", Overlap(out, params) ? "params" : "grads",
                     "; pass a separate buffer (or params itself, which needs no copy)")));
  }
}

// The per-step scalars every pass checks.
void CheckHyper(const char* optimizer, const StepHyper& hyper, double grad_scale) {
  if (!(std::isfinite(hyper.lr) && hyper.lr >= 0.0)) {
    throw Error(absl::InvalidArgumentError(
        absl::StrCat(optimizer, " step: lr = ", hyper.lr, " must be finite and >= 0; check the scheduler")));
  }
  if (hyper.momentum) CheckUnitInterval(optimizer, "momentum", *hyper.momentum);
  if (hyper.beta2) CheckUnitInterval(optimizer, "beta2", *hyper.beta2);
  // The kernels multiply in float: a scale beyond float's range would be inf.
  if (!(std::abs(grad_scale) <= std::numeric_limits<float>::max())) {
    throw Error(absl::InvalidArgumentError(
        absl::StrCat(optimizer, " step: extras.grad_scale = ", grad_scale,
                     " is not a finite float; check the loss scale and the clipping coefficient")));
  }
}

// ApplyIncrementWith's checks: `params` and `increment` contiguous fp32 CPU
// tensors of equal numel that share no memory; `hyper` as for CheckStepArgs.
void CheckApplyArgs(const char* optimizer, const at::Tensor& params, const at::Tensor& increment,
                    const StepHyper& hyper) {
  for (const auto& [what, t] :
       {std::pair<const char*, const at::Tensor*>{"params", &params}, {"increment", &increment}}) {
    if (!IsFlatFloatCpu(*t)) {
      throw Error(absl::InvalidArgumentError(absl::StrCat(optimizer, " apply: ", what,
                                                          " must be a contiguous float32 CPU tensor; got a ",
                                                          t->defined() ? Describe(*t) : "undefined tensor")));
    }
  }
  if (params.numel() != increment.numel() || Overlap(params, increment)) {
    throw Error(absl::InvalidArgumentError(absl::StrCat(optimizer, " apply: params (", params.numel(),
                                                        " elements) and increment (", increment.numel(),
                                                        ") must be separate buffers of one shard")));
  }
  CheckHyper(optimizer, hyper, 1.0);
}

}  // namespace

const char* OptimizerName(OptimizerType type) {
  switch (type) {
    case OptimizerType::kAdam: return "Adam";
    case OptimizerType::kAdamW: return "AdamW";
    case OptimizerType::kAdagrad: return "Adagrad";
    case OptimizerType::kLion: return "Lion";
    case OptimizerType::kSGD: return "SGD";
  }
  return "unknown optimizer";
}

void CheckStepArgs(const char* optimizer, const at::Tensor& params, const at::Tensor& grads, const StepHyper& hyper,
                   const StepExtras& extras) {
  if (!params.defined() || !grads.defined()) {
    throw Error(absl::InvalidArgumentError(
        absl::StrCat(optimizer, " step: ", params.defined() ? "grads" : "params", " is an undefined tensor")));
  }
  if (!IsFlatFloatCpu(params)) {
    throw Error(absl::InvalidArgumentError(
        absl::StrCat(optimizer,
                     " step: params must be a contiguous float32 CPU tensor (the fp32 master "
                     "shard); got a ",
                     Describe(params))));
  }
  if (!IsFlatCpu(grads) || !IsKernelDType(grads.scalar_type())) {
    throw Error(absl::InvalidArgumentError(
        absl::StrCat(optimizer,
                     " step: grads must be a contiguous float32, bfloat16 or float16 CPU tensor; "
                     "got a ",
                     Describe(grads))));
  }
  if (params.numel() != grads.numel()) {
    throw Error(absl::InvalidArgumentError(absl::StrCat(optimizer, " step: params has ", params.numel(),
                                                        " elements but grads has ", grads.numel(),
                                                        "; both must be the same shard")));
  }
  if (Overlap(params, grads)) {
    throw Error(absl::InvalidArgumentError(
        absl::StrCat(optimizer, " step: params and grads share storage; pass separate buffers")));
  }
  CheckHyper(optimizer, hyper, extras.grad_scale);
  CheckOut(optimizer, params, grads, extras);
}

void CheckMomentsArgs(const char* optimizer, const at::Tensor& grads, const StepHyper& hyper, double grad_scale) {
  if (!IsFlatFloatCpu(grads)) {
    throw Error(absl::InvalidArgumentError(absl::StrCat(
        optimizer, " moments: grads must be a contiguous float32 CPU tensor (it receives the increment); got a ",
        grads.defined() ? Describe(grads) : "undefined tensor")));
  }
  CheckHyper(optimizer, hyper, grad_scale);
}

void ApplyIncrementWith(const kernels::KernelTable* kernels, const char* optimizer, at::Tensor& params,
                        const at::Tensor& increment, const StepHyper& hyper, double weight_decay) {
  CheckApplyArgs(optimizer, params, increment, hyper);
  float* p = params.data_ptr<float>();
  const float* inc = increment.data_ptr<float>();
  const int64_t n = params.numel();
  if (kernels == nullptr) {
    const double decay = 1.0 - hyper.lr * weight_decay;
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(static_cast<double>(p[i]) * decay - inc[i]);
    return;
  }
  ForEachChunk(n, [&](int64_t begin, int64_t end) {
    kernels->apply_increment(p + begin, inc + begin, end - begin, hyper.lr, weight_decay);
  });
}

at::Tensor& StateTensor(const char* optimizer, ShardState& state, const std::string& name, const at::Tensor& params,
                        const at::Tensor& grads, const StepExtras& extras) {
  auto it = state.tensors.find(name);
  if (it == state.tensors.end()) {
    throw Error(absl::FailedPreconditionError(
        absl::StrCat(optimizer, " step: the optimizer state has no '", name,
                     "' tensor; create the state with InitState or load a checkpoint of ", optimizer)));
  }
  at::Tensor& t = it->second;
  if (!IsFlatFloatCpu(t) || t.numel() != params.numel()) {
    throw Error(absl::FailedPreconditionError(
        absl::StrCat(optimizer, " step: state '", name, "' must be a contiguous float32 CPU tensor of ", params.numel(),
                     " elements like the shard; got a ", t.defined() ? Describe(t) : "undefined tensor")));
  }
  for (const auto& [what, other] :
       {std::pair<const char*, const at::Tensor*>{"params", &params}, {"grads", &grads}, {"extras.out", &extras.out}}) {
    if (other->defined() && Overlap(t, *other)) {
      throw Error(absl::FailedPreconditionError(
          absl::StrCat(optimizer, " step: state '", name, "' shares storage with ", what)));
    }
  }
  return t;
}

at::Tensor ZerosLikeParams(const at::Tensor& params) {
  return at::zeros(params.sizes(), params.options().dtype(at::kFloat));
}

kernels::GradIn GradArg(const at::Tensor& grads, const StepExtras& extras) {
  return {grads.data_ptr(), KernelDType(grads.scalar_type()), extras.grad_scale};
}

kernels::ParamOut OutArg(const at::Tensor& params, const StepExtras& extras) {
  kernels::ParamOut out;
  if (!extras.out.defined() || OutIsParams(params, extras)) return out;
  out.data = extras.out.data_ptr();
  out.dtype = KernelDType(extras.out.scalar_type());
  out.bf16_nan = TorchBf16NaNBits();
  return out;
}

at::Tensor GradsAsFloat(const at::Tensor& grads) {
  return grads.scalar_type() == at::kFloat ? grads : grads.to(at::kFloat);
}

void WriteOutWithTorch(const at::Tensor& params, const StepExtras& extras) {
  if (!extras.out.defined() || OutIsParams(params, extras)) return;
  at::Tensor out = extras.out;  // a handle: copy_ writes the caller's memory
  out.view({-1}).copy_(params.view({-1}));
}

uint16_t TorchBf16NaNBits() {
  // 64 elements: long enough for LibTorch's vectorised loop, whose choice is
  // the one that matters for shards.
  static const uint16_t bits = [] {
    const at::Tensor nan = at::full({64}, std::numeric_limits<float>::quiet_NaN(), at::kFloat).to(at::kBFloat16);
    return nan.data_ptr<at::BFloat16>()[0].x;
  }();
  return bits;
}

}  // namespace zt::ops::internal
