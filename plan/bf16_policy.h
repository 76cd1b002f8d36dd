// How a bf16 model computes on the CPU: the policy and the pure rule that
// resolves it. No LibTorch (zt train's front checks a --bf16-compute flag
// with it); engine/bf16_compute.h reads the CPU and installs the kernels.
//
// bf16 is chosen for memory and bytes on the wire, and its arithmetic speed
// depends on the CPU: LibTorch 1.13 sends a bf16 GEMM to oneDNN where the
// CPU has AVX-512 (BW, VL, DQ) and oneDNN is enabled -- fast with
// AVX512-BF16 or AMX, emulated (slower than fp32) without -- and to its own
// reference loops everywhere else, which take about ten times an fp32 step
// and accumulate in bf16.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace zt::plan {

enum class Bf16Compute {
  kAuto,  // kBf16 where the CPU computes bf16 natively, else kFp32
  kBf16,  // LibTorch's own bf16 kernels, whatever the CPU
  kFp32,  // bf16 tensors, fp32 arithmetic in GEMMs, layer norm, GELU and SiLU
};

// What decides whether LibTorch's bf16 GEMM is fast here.
struct CpuBf16Support {
  bool onednn_enabled = false;     // LibTorch built with oneDNN and not disabled at run time
  bool avx512_core = false;        // AVX-512 BW, VL and DQ: LibTorch then routes bf16 GEMMs to oneDNN
  bool bf16_instructions = false;  // AVX512-BF16 or AMX-BF16: oneDNN's bf16 GEMM is native, not emulated
};

struct Bf16ComputeChoice {
  Bf16Compute compute = Bf16Compute::kBf16;  // kBf16 or kFp32, never kAuto
  std::string reason;                        // one line for the log: what was chosen and why
};

// kAuto becomes kBf16 when oneDNN is enabled and the CPU has AVX-512 core
// and bf16 instructions, else kFp32; kBf16 and kFp32 are kept (kBf16 on a
// CPU without native bf16 says what it costs).
Bf16ComputeChoice ResolveBf16Compute(Bf16Compute requested, const CpuBf16Support& cpu);

// "auto", "bf16" or "fp32"; anything else is InvalidArgument naming the
// accepted values.
absl::StatusOr<Bf16Compute> ParseBf16Compute(std::string_view text);
const char* Bf16ComputeName(Bf16Compute compute);

}  // namespace zt::plan
