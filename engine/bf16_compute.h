// bf16 tensors with fp32 arithmetic on the CPU, and what this CPU can do
// (the policy and its rule: plan/bf16_policy.h).
//
// Bf16Compute::kFp32 keeps every tensor in bf16 -- parameters, gradients,
// the activations autograd saves, everything communicated -- and computes
// the GEMMs (mm, addmm, bmm, baddbmm), layer norm and the GELU and SiLU
// activations (forward and backward) in fp32: the op's inputs are upcast
// where it runs and its result is rounded to bf16 once, as oneDNN's bf16
// GEMM does (fp32 accumulation). Only transient copies are fp32, each freed
// when its op returns. LibTorch 1.13's bf16 layer norm is a reference loop
// on every CPU, and its bf16 GELU and SiLU run 2.5-5x slower than fp32.
//
//   plan::Bf16ComputeChoice c = plan::ResolveBf16Compute(Bf16Compute::kAuto, DetectCpuBf16Support());
//   std::optional<Fp32ComputeForBf16> scope;
//   if (c.compute == Bf16Compute::kFp32) scope.emplace();
#pragma once

#include "plan/bf16_policy.h"

namespace zt {

using Bf16Compute = plan::Bf16Compute;

// Reads this process's CPU and LibTorch's oneDNN switch
// (at::globalContext().userEnabledMkldnn()).
plan::CpuBf16Support DetectCpuBf16Support();

// While at least one exists, bf16 CPU tensors passed to aten::mm, addmm,
// bmm, baddbmm, native_layer_norm(_backward), gelu(_backward) and
// silu(_backward) compute in fp32 (other dtypes run LibTorch's kernels
// unchanged). Process-wide: the
// kernels are registered with LibTorch's dispatcher for the CPU key, so
// every thread and every caller in the process is affected, not only the
// engine that made the scope; the last one destroyed restores LibTorch's
// kernels. Construction and destruction are thread-safe; they must not run
// while another thread is inside one of these ops. Autograd is unchanged:
// the backward formulas call the same ops, so backward computes in fp32
// too. Layer norm's saved mean and rstd are fp32 (they are per row, small).
class Fp32ComputeForBf16 {
 public:
  Fp32ComputeForBf16();
  ~Fp32ComputeForBf16();
  Fp32ComputeForBf16(const Fp32ComputeForBf16&) = delete;
  Fp32ComputeForBf16& operator=(const Fp32ComputeForBf16&) = delete;

  // Whether any scope is alive now (tests).
  static bool Active();
};

}  // namespace zt
