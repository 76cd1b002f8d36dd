// The optimizer kernel variants and their run-time choice: ISA names and
// availability, the ZT_CPU_ISA override (a bad value fails with zt::Error,
// not a crash), and each variant's conversions bit for bit against LibTorch's
// Tensor::to: every fp16 and bf16 value widened, a sweep of 17M fp32 bit
// patterns plus special values rounded, at unaligned offsets and tail lengths.
#include "ops/kernels.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ops/shard_optimizer.h"
#include "tests/ops/optimizer_cases.h"
#include "util/error.h"

namespace zt::ops::kernels {
namespace {

using testutil::AvailableKernels;
using testutil::ExpectBitEqual;

TEST(KernelDispatch, EveryAvailableTableIsTheIsaAskedFor) {
  ASSERT_NE(KernelsFor(Isa::kGeneric), nullptr) << "the generic variant must always run";
  for (Isa isa : kAllIsas) {
    const KernelTable* k = KernelsFor(isa);
    std::printf("%-8s %s\n", IsaName(isa), k != nullptr ? "available" : "not available on this CPU");
    if (k == nullptr) continue;
    EXPECT_EQ(k->isa, isa);
    for (auto fn : {reinterpret_cast<const void*>(k->adam), reinterpret_cast<const void*>(k->sgd),
                    reinterpret_cast<const void*>(k->adagrad), reinterpret_cast<const void*>(k->lion),
                    reinterpret_cast<const void*>(k->widen), reinterpret_cast<const void*>(k->narrow),
                    reinterpret_cast<const void*>(k->adam_moments), reinterpret_cast<const void*>(k->lion_moments),
                    reinterpret_cast<const void*>(k->apply_increment)}) {
      EXPECT_NE(fn, nullptr) << IsaName(isa);
    }
  }
}

// ChooseIsa's error for `requested`, or OK if it accepts it.
absl::Status ChooseIsaStatus(const std::string& requested) {
  try {
    ChooseIsa(requested);
    return absl::OkStatus();
  } catch (const Error& e) {
    return e.status();
  }
}

TEST(KernelDispatch, WithoutOverrideTheWidestAvailableIsaIsChosen) {
  Isa expected = Isa::kGeneric;
  for (Isa isa : kAllIsas) {
    if (KernelsFor(isa) != nullptr) expected = isa;  // kAllIsas is ordered narrow to wide
  }
  EXPECT_EQ(ChooseIsa(""), expected) << IsaName(ChooseIsa(""));
  for (Isa isa : kAllIsas) {
    if (KernelsFor(isa) != nullptr) {
      EXPECT_EQ(ChooseIsa(IsaName(isa)), isa);
    }
  }
}

TEST(KernelDispatch, ActiveIsaFollowsTheEnvironment) {
  const char* env = std::getenv("ZT_CPU_ISA");
  const std::string requested = env == nullptr ? "" : env;
  if (!ChooseIsaStatus(requested).ok()) {
    EXPECT_THROW(ActiveIsa(), Error);
    return;
  }
  EXPECT_EQ(ActiveIsa(), ChooseIsa(requested));
  EXPECT_EQ(&ActiveKernels(), KernelsFor(ActiveIsa()));
  std::printf("active ISA: %s\n", IsaName(ActiveIsa()));
}

TEST(KernelDispatch, UnknownNameIsAnInvalidArgumentListingTheChoices) {
  const absl::Status status = ChooseIsaStatus("sse9");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("generic, avx2, avx512"), std::string::npos) << status;
}

TEST(KernelDispatch, UnavailableIsaNamesTheMissingCpuFeatures) {
  bool any = false;
  for (Isa isa : kAllIsas) {
    if (KernelsFor(isa) != nullptr) continue;
    any = true;
    const absl::Status status = ChooseIsaStatus(IsaName(isa));
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << IsaName(isa) << status;
    EXPECT_NE(status.message().find("missing: "), std::string::npos) << status;
    std::printf("%s\n", std::string(status.message()).c_str());
  }
  if (!any) GTEST_SKIP() << "this CPU runs every variant; nothing is missing";
}

// A bad ZT_CPU_ISA must surface as zt::Error from MakeShardOptimizer (and
// again on the next call), not as a crash. Runs in a fresh child process
// (death-test "threadsafe" style re-executes the binary), so the choice is
// made there for the first time, under the variable set in the child.
void ExitWithActiveKernelsError(const char* value) {
  ::setenv("ZT_CPU_ISA", value, 1);
  int errors = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      OptimizerConfig config;
      config.type = OptimizerType::kAdamW;
      MakeShardOptimizer(config);
    } catch (const Error& e) {
      ++errors;
      if (attempt == 1) std::fprintf(stderr, "caught: %s\n", e.what());
    }
  }
  std::exit(errors == 2 ? 3 : 4);
}

TEST(KernelDispatchDeathTest, BadOverrideThrowsAClearErrorOnEveryCall) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(ExitWithActiveKernelsError("sse9"), ::testing::ExitedWithCode(3),
              "caught: ZT_CPU_ISA=sse9 is not an ISA name; use one of: generic, avx2, avx512");
  for (Isa isa : kAllIsas) {
    if (KernelsFor(isa) != nullptr) continue;
    EXPECT_EXIT(ExitWithActiveKernelsError(IsaName(isa)), ::testing::ExitedWithCode(3),
                std::string("caught: ZT_CPU_ISA=") + IsaName(isa) +
                    " asks for optimizer kernels this machine cannot run \\(missing: ");
  }
}

// Fills the part of the table tests need for conversions only.
ParamOut Out(void* data, DType dtype, uint16_t bf16_nan) {
  ParamOut out;
  out.data = data;
  out.dtype = dtype;
  out.bf16_nan = bf16_nan;
  return out;
}

uint16_t TorchBf16NaN() {
  return at::full({64}, std::numeric_limits<float>::quiet_NaN()).to(at::kBFloat16).data_ptr<at::BFloat16>()[0].x;
}

// Every 16-bit pattern, widened by each variant at an odd offset and length
// (so vector loops have a head and the F16C loops a scalar tail), against
// Tensor::to(kFloat).
TEST(KernelConversions, WidenEveryHalfAndBfloat16ValueLikeTensorTo) {
  for (const KernelTable* k : AvailableKernels()) {
    for (auto [torch_dtype, dtype] :
         {std::pair{at::kHalf, DType::kFloat16}, std::pair{at::kBFloat16, DType::kBFloat16}}) {
      SCOPED_TRACE(std::string(IsaName(k->isa)) + " " + c10::toString(torch_dtype));
      const at::Tensor bits = torch::arange(0, 65536, torch::kInt32).to(torch::kInt16);
      const at::Tensor values = bits.view(torch_dtype);
      const at::Tensor expected = values.to(at::kFloat);
      for (int64_t offset : {0, 3}) {
        const int64_t n = 65536 - offset - (offset == 0 ? 0 : 5);
        at::Tensor got = torch::zeros({n});
        k->widen(static_cast<const char*>(values.data_ptr()) + offset * 2, dtype, got.data_ptr<float>(), n);
        ExpectBitEqual(got, expected.slice(0, offset, offset + n), "widen");
      }
    }
  }
}

// fp32 bit patterns: a stride-251 sweep over all 2^32 (17M values, every
// exponent and many mantissas), then NaNs with assorted payloads and signs,
// infinities, zeros, denormals, the largest finite values and values exactly
// half-way between two bf16 / fp16 neighbours (ties go to even).
at::Tensor Float32Patterns() {
  std::vector<uint32_t> bits;
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 251) bits.push_back(static_cast<uint32_t>(u));
  const uint32_t specials[] = {
      0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FC12345u, 0xFFA00001u, 0x7FFFFFFFu,
      0x7F800000u, 0xFF800000u, 0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu, 0x7F7FFFFFu,
      0xFF7FFFFFu, 0x3F808000u, 0x3F818000u, 0x3F808001u, 0x3F817FFFu, 0x7F7F8000u,  // bf16 ties and overflow
      0x3F801000u, 0x3F803000u, 0x477FF000u, 0x477FEFFFu, 0x387FE000u,               // fp16 ties and overflow
      0x33000000u, 0x33000001u, 0x33800000u, 0x337FFFFFu, 0x38800000u,               // fp16 denormal edges
  };
  for (uint32_t s : specials) bits.push_back(s);
  at::Tensor t = torch::empty({static_cast<int64_t>(bits.size())}, torch::kFloat);
  std::memcpy(t.data_ptr(), bits.data(), bits.size() * sizeof(uint32_t));
  return t;
}

TEST(KernelConversions, NarrowMatchesTensorToBitForBit) {
  const at::Tensor src = Float32Patterns();
  const uint16_t bf16_nan = TorchBf16NaN();
  for (const KernelTable* k : AvailableKernels()) {
    for (auto [torch_dtype, dtype] : {std::pair{at::kHalf, DType::kFloat16}, std::pair{at::kBFloat16, DType::kBFloat16},
                                      std::pair{at::kFloat, DType::kFloat32}}) {
      SCOPED_TRACE(std::string(IsaName(k->isa)) + " " + c10::toString(torch_dtype));
      at::Tensor got = torch::empty({src.numel()}, torch_dtype);
      k->narrow(src.data_ptr<float>(), Out(got.data_ptr(), dtype, bf16_nan), src.numel());
      ExpectBitEqual(got, src.to(torch_dtype), "narrow");
    }
  }
}

// Offsets 0..16 and lengths around the 8- and 16-lane loops: the variant
// writes exactly [offset, offset + len) and nothing around it.
TEST(KernelConversions, NarrowAndWidenTailsStayInBounds) {
  const at::Tensor src = torch::randn({128}) * 1000;
  const uint16_t bf16_nan = TorchBf16NaN();
  for (const KernelTable* k : AvailableKernels()) {
    for (auto [torch_dtype, dtype] : {std::pair{at::kHalf, DType::kFloat16}, std::pair{at::kBFloat16, DType::kBFloat16},
                                      std::pair{at::kFloat, DType::kFloat32}}) {
      const at::Tensor expected = src.to(torch_dtype);
      for (int64_t offset = 0; offset <= 16; ++offset) {
        for (int64_t len : {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 47, 64}) {
          SCOPED_TRACE(std::string(IsaName(k->isa)) + " " + c10::toString(torch_dtype) + " offset " +
                       std::to_string(offset) + " len " + std::to_string(len));
          at::Tensor out = torch::full({128}, 7.0, torch_dtype);  // sentinel
          const at::Tensor sentinel = out.clone();
          const int64_t size = out.element_size();
          k->narrow(src.data_ptr<float>() + offset,
                    Out(static_cast<char*>(out.data_ptr()) + offset * size, dtype, bf16_nan), len);
          ExpectBitEqual(out.slice(0, 0, offset), sentinel.slice(0, 0, offset), "before");
          ExpectBitEqual(out.slice(0, offset, offset + len), expected.slice(0, offset, offset + len), "inside");
          ExpectBitEqual(out.slice(0, offset + len), sentinel.slice(0, offset + len), "after");

          at::Tensor wide = torch::full({128}, -3.0f);
          k->widen(static_cast<const char*>(expected.data_ptr()) + offset * size, dtype,
                   wide.data_ptr<float>() + offset, len);
          ExpectBitEqual(wide.slice(0, offset, offset + len), expected.slice(0, offset, offset + len).to(at::kFloat),
                         "widen inside");
          ExpectBitEqual(wide.slice(0, offset + len), torch::full({128 - offset - len}, -3.0f), "widen after");
        }
      }
    }
  }
}

// The avx512 variant is built on every x86-64 machine but runs only on CPUs
// with AVX-512 F/BW/VL/DQ; say so instead of passing silently.
TEST(KernelConversions, Avx512VariantRunsWhereTheCpuHasIt) {
  if (KernelsFor(Isa::kAvx512) == nullptr) {
    GTEST_SKIP() << "this CPU lacks AVX-512 F/BW/VL/DQ: the avx512 kernels are built but cannot "
                    "run here, so their bit-identity checks are skipped";
  }
  const at::Tensor src = Float32Patterns().slice(0, 0, 4099);
  at::Tensor a = torch::empty({src.numel()}, at::kHalf);
  at::Tensor b = torch::empty({src.numel()}, at::kHalf);
  KernelsFor(Isa::kAvx512)->narrow(src.data_ptr<float>(), Out(a.data_ptr(), DType::kFloat16, 0), src.numel());
  KernelsFor(Isa::kGeneric)->narrow(src.data_ptr<float>(), Out(b.data_ptr(), DType::kFloat16, 0), src.numel());
  ExpectBitEqual(a, b, "avx512 vs generic fp16 rounding");
}

}  // namespace
}  // namespace zt::ops::kernels
