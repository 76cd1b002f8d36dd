// plan/bf16_policy.h: which bf16 compute each CPU gets, and the flag's spelling.
#include "plan/bf16_policy.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace zt::plan {
namespace {

CpuBf16Support Cpu(bool onednn, bool avx512, bool bf16) {
  CpuBf16Support c;
  c.onednn_enabled = onednn;
  c.avx512_core = avx512;
  c.bf16_instructions = bf16;
  return c;
}

TEST(ResolveBf16Compute, AutoIsNativeOnlyWithOneDnnAvx512AndBf16Instructions) {
  EXPECT_EQ(ResolveBf16Compute(Bf16Compute::kAuto, Cpu(true, true, true)).compute, Bf16Compute::kBf16);
  // Each missing piece makes LibTorch's bf16 GEMM slow: reference loops
  // (no oneDNN, no AVX-512) or oneDNN's emulation (no bf16 instructions).
  for (const CpuBf16Support& cpu :
       {Cpu(false, true, true), Cpu(true, false, false), Cpu(true, true, false), Cpu(false, false, false)}) {
    const Bf16ComputeChoice c = ResolveBf16Compute(Bf16Compute::kAuto, cpu);
    EXPECT_EQ(c.compute, Bf16Compute::kFp32);
    EXPECT_TRUE(absl::StrContains(c.reason, "fp32 GEMMs")) << c.reason;
  }
  EXPECT_TRUE(
      absl::StrContains(ResolveBf16Compute(Bf16Compute::kAuto, Cpu(false, true, true)).reason, "oneDNN is off"));
  EXPECT_TRUE(absl::StrContains(ResolveBf16Compute(Bf16Compute::kAuto, Cpu(true, false, false)).reason, "no AVX-512"));
  EXPECT_TRUE(absl::StrContains(ResolveBf16Compute(Bf16Compute::kAuto, Cpu(true, true, false)).reason, "emulates"));
}

TEST(ResolveBf16Compute, AnExplicitChoiceIsKeptAndItsCostSaid) {
  for (bool native : {false, true}) {
    const CpuBf16Support cpu = Cpu(native, native, native);
    EXPECT_EQ(ResolveBf16Compute(Bf16Compute::kFp32, cpu).compute, Bf16Compute::kFp32);
    const Bf16ComputeChoice bf16 = ResolveBf16Compute(Bf16Compute::kBf16, cpu);
    EXPECT_EQ(bf16.compute, Bf16Compute::kBf16);
    // Forcing LibTorch's kernels where they are slow says so.
    EXPECT_EQ(absl::StrContains(bf16.reason, "10x"), !native) << bf16.reason;
  }
}

TEST(ParseBf16Compute, NamesTheAcceptedValues) {
  EXPECT_EQ(*ParseBf16Compute("auto"), Bf16Compute::kAuto);
  EXPECT_EQ(*ParseBf16Compute("bf16"), Bf16Compute::kBf16);
  EXPECT_EQ(*ParseBf16Compute("fp32"), Bf16Compute::kFp32);
  for (Bf16Compute c : {Bf16Compute::kAuto, Bf16Compute::kBf16, Bf16Compute::kFp32}) {
    EXPECT_EQ(*ParseBf16Compute(Bf16ComputeName(c)), c);
  }
  const auto bad = ParseBf16Compute("float32");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "auto, bf16 or fp32, got 'float32'")) << bad.status();
}

}  // namespace
}  // namespace zt::plan
