// Shared argument checks and helpers for the shard optimizers
// (ops/optimizer_common.h).
#include "ops/optimizer_common.h"

#include <cmath>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "util/error.h"

namespace zt::ops::internal {
namespace {

std::string Describe(const at::Tensor& t) {
  return absl::StrCat(std::string(c10::toString(t.scalar_type())), " ", t.device().str(),
                      t.is_contiguous() ? "" : " non-contiguous", " tensor of ", t.numel(),
                      " elements");
}

bool IsFlatFloatCpu(const at::Tensor& t) {
  return t.defined() && t.scalar_type() == at::kFloat && t.device().is_cpu() &&
         t.is_contiguous() && t.layout() == at::kStrided;
}

void CheckUnitInterval(const char* optimizer, const char* what, double value) {
  if (!(value >= 0.0 && value < 1.0)) {
    throw Error(absl::InvalidArgumentError(absl::StrCat(
        optimizer, " step: ", what, " = ", value, " is outside [0, 1); check the scheduler")));
  }
}

}  // namespace

const char* OptimizerName(OptimizerType type) {
  switch (type) {
    case OptimizerType::kAdam:
      return "Adam";
    case OptimizerType::kAdamW:
      return "AdamW";
    case OptimizerType::kAdagrad:
      return "Adagrad";
    case OptimizerType::kLion:
      return "Lion";
    case OptimizerType::kSGD:
      return "SGD";
  }
  return "unknown optimizer";
}

void CheckStepArgs(const char* optimizer, const at::Tensor& params, const at::Tensor& grads,
                   const StepHyper& hyper) {
  if (!params.defined() || !grads.defined()) {
    throw Error(absl::InvalidArgumentError(
        absl::StrCat(optimizer, " step: ", params.defined() ? "grads" : "params",
                     " is an undefined tensor")));
  }
  for (const auto* t : {&params, &grads}) {
    if (!IsFlatFloatCpu(*t)) {
      throw Error(absl::InvalidArgumentError(absl::StrCat(
          optimizer, " step: ", t == &params ? "params" : "grads",
          " must be a contiguous float32 CPU tensor (the fp32 master shard and its gradient); got a ",
          Describe(*t))));
    }
  }
  if (params.numel() != grads.numel()) {
    throw Error(absl::InvalidArgumentError(
        absl::StrCat(optimizer, " step: params has ", params.numel(), " elements but grads has ",
                     grads.numel(), "; both must be the same shard")));
  }
  if (params.numel() > 0 && params.data_ptr() == grads.data_ptr()) {
    throw Error(absl::InvalidArgumentError(
        absl::StrCat(optimizer, " step: params and grads share storage; pass separate buffers")));
  }
  if (!(std::isfinite(hyper.lr) && hyper.lr >= 0.0)) {
    throw Error(absl::InvalidArgumentError(absl::StrCat(
        optimizer, " step: lr = ", hyper.lr, " must be finite and >= 0; check the scheduler")));
  }
  if (hyper.momentum) CheckUnitInterval(optimizer, "momentum", *hyper.momentum);
  if (hyper.beta2) CheckUnitInterval(optimizer, "beta2", *hyper.beta2);
}

at::Tensor& StateTensor(const char* optimizer, ShardState& state, const std::string& name,
                        const at::Tensor& params) {
  auto it = state.tensors.find(name);
  if (it == state.tensors.end()) {
    throw Error(absl::FailedPreconditionError(
        absl::StrCat(optimizer, " step: the optimizer state has no '", name,
                     "' tensor; create the state with InitState or load a checkpoint of ",
                     optimizer)));
  }
  at::Tensor& t = it->second;
  if (!IsFlatFloatCpu(t) || t.numel() != params.numel()) {
    throw Error(absl::FailedPreconditionError(absl::StrCat(
        optimizer, " step: state '", name, "' must be a contiguous float32 CPU tensor of ",
        params.numel(), " elements like the shard; got a ", t.defined() ? Describe(t) : "undefined tensor")));
  }
  if (params.numel() > 0 && t.data_ptr() == params.data_ptr()) {
    throw Error(absl::FailedPreconditionError(
        absl::StrCat(optimizer, " step: state '", name, "' shares storage with params")));
  }
  return t;
}

at::Tensor ZerosLikeParams(const at::Tensor& params) {
  return at::zeros(params.sizes(), params.options().dtype(at::kFloat));
}

}  // namespace zt::ops::internal
