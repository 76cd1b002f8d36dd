// The bf16 compute policy's rule (plan/bf16_policy.h).
#include "plan/bf16_policy.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace zt::plan {

Bf16ComputeChoice ResolveBf16Compute(Bf16Compute requested, const CpuBf16Support& cpu) {
  const bool native = cpu.onednn_enabled && cpu.avx512_core && cpu.bf16_instructions;
  std::string why;
  if (native) {
    why = "the CPU has bf16 instructions (AVX512-BF16 or AMX) and LibTorch's oneDNN uses them";
  } else if (!cpu.onednn_enabled) {
    why = "LibTorch's oneDNN is off, so its bf16 GEMMs are reference loops (about 10x an fp32 step)";
  } else if (!cpu.avx512_core) {
    why = "the CPU has no AVX-512, so LibTorch's bf16 GEMMs are reference loops (about 10x an fp32 step)";
  } else {
    why = "the CPU has no AVX512-BF16 or AMX, so oneDNN emulates bf16 GEMMs (slower than fp32)";
  }
  Bf16ComputeChoice c;
  switch (requested) {
    case Bf16Compute::kAuto:
      c.compute = native ? Bf16Compute::kBf16 : Bf16Compute::kFp32;
      c.reason = native
                     ? absl::StrCat("bf16 compute: native bf16 kernels (auto: ", why, ")")
                     : absl::StrCat("bf16 compute: bf16 tensors, fp32 GEMMs, layer norm and activations (auto: ", why,
                                    "); --bf16-compute bf16 forces LibTorch's bf16 kernels");
      break;
    case Bf16Compute::kBf16:
      c.compute = Bf16Compute::kBf16;
      c.reason = native ? absl::StrCat("bf16 compute: native bf16 kernels (", why, ")")
                        : absl::StrCat("bf16 compute: LibTorch's bf16 kernels as asked, though ", why,
                                       "; --bf16-compute auto computes in fp32 here");
      break;
    case Bf16Compute::kFp32:
      c.compute = Bf16Compute::kFp32;
      c.reason = "bf16 compute: bf16 tensors, fp32 GEMMs, layer norm and activations (as asked)";
      break;
  }
  return c;
}

absl::StatusOr<Bf16Compute> ParseBf16Compute(std::string_view text) {
  if (text == "auto") return Bf16Compute::kAuto;
  if (text == "bf16") return Bf16Compute::kBf16;
  if (text == "fp32") return Bf16Compute::kFp32;
  return absl::InvalidArgumentError(
      absl::StrCat("bf16-compute must be auto, bf16 or fp32, got '", std::string(text), "'"));
}

const char* Bf16ComputeName(Bf16Compute compute) {
  switch (compute) {
    case Bf16Compute::kAuto: return "auto";
    case Bf16Compute::kBf16: return "bf16";
    case Bf16Compute::kFp32: return "fp32";
  }
  return "?";
}

}  // namespace zt::plan
