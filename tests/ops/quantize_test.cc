// Block quantization (ops/quantize.h, ops/kernels.h QuantFormat): every ISA
// variant this CPU runs returns exactly the scalar reference's scales and
// payload and dequantizes to exactly its values, for int8 and int4, block
// sizes from 1 to 4096, lengths with short last blocks, zeros, tiny values,
// signed zeros, ties of the rounding and non-finite blocks; the round trip
// is within scale / 2 (plus float rounding) of the input, element by element;
// a non-finite block dequantizes to NaN; bad formats are named.
#include "ops/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace zt::ops {
namespace {

using kernels::Isa;
using kernels::KernelsFor;
using kernels::KernelTable;

std::vector<const KernelTable*> Tables() {
  std::vector<const KernelTable*> out;
  for (Isa isa : kernels::kAllIsas) {
    if (const KernelTable* k = KernelsFor(isa)) out.push_back(k);
  }
  return out;
}

// Inputs that exercise every rule: normal values of mixed magnitude, a zero
// block, a block of tiny values, signed zeros, exact ties of the rounding.
std::vector<float> Inputs(int64_t n, int64_t block, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t blk = i / block;
    float v = normal(rng) * std::pow(10.0f, static_cast<float>(blk % 7) - 3.0f);
    if (blk % 5 == 1) v = 0.0f;                  // a zero block
    if (blk % 11 == 3) v = std::ldexp(v, -125);  // below 2^-120: quantizes to 0
    if (i % 13 == 0) v = -0.0f;                  // signed zeros
    x[static_cast<size_t>(i)] = v;
  }
  // Ties: in a block whose amax is 127, x * (127 / 127) = x exactly, and
  // x = k + 0.5 rounds to the even neighbour.
  if (n >= 8 && block >= 8) {
    x[0] = 127.0f;
    x[1] = 2.5f;
    x[2] = -3.5f;
    x[3] = 0.5f;
    x[4] = -0.5f;
  }
  return x;
}

void ExpectSameBits(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    uint32_t x, y;
    std::memcpy(&x, &a[i], 4);
    std::memcpy(&y, &b[i], 4);
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;  // which NaN is not part of the contract
    ASSERT_EQ(x, y) << what << " element " << i << ": " << a[i] << " vs " << b[i];
  }
}

TEST(Quantize, EveryIsaEqualsTheReferenceBitForBit) {
  const std::vector<const KernelTable*> tables = Tables();
  ASSERT_FALSE(tables.empty());
  int cases = 0;
  for (int bits : {8, 4}) {
    for (int64_t block : {2, 8, 32, 100, 2048, 4096}) {
      for (int64_t n :
           {int64_t{0}, int64_t{1}, int64_t{7}, block - 1, block, block + 1, 3 * block + 5, int64_t{50000}}) {
        if (n < 0) continue;
        const QuantFormat f{bits, block};
        ASSERT_EQ(CheckQuantFormat(f), "");
        const std::vector<float> x = Inputs(n, block, static_cast<uint32_t>(n * 31 + block + bits));
        std::vector<float> ref_scales(static_cast<size_t>(QuantScales(n, f)));
        std::vector<uint8_t> ref_q(static_cast<size_t>(QuantPayloadBytes(n, f)));
        QuantizeReference(x.data(), n, f, ref_scales.data(), ref_q.data());
        std::vector<float> ref_y(static_cast<size_t>(n)), ref_acc(x);
        DequantizeReference(ref_q.data(), ref_scales.data(), n, f, ref_y.data(), false);
        DequantizeReference(ref_q.data(), ref_scales.data(), n, f, ref_acc.data(), true);
        for (const KernelTable* k : tables) {
          const std::string what = absl::StrCat(kernels::IsaName(k->isa), " bits ", bits, " block ", block, " n ", n);
          std::vector<float> scales(ref_scales.size(), -1.0f);
          std::vector<uint8_t> q(ref_q.size(), 0xAB);
          k->quantize(x.data(), n, f, scales.data(), q.data());
          ExpectSameBits(scales, ref_scales, what + " scales");
          ASSERT_EQ(q, ref_q) << what << " payload";
          std::vector<float> y(static_cast<size_t>(n), 7.0f), acc(x);
          k->dequantize(q.data(), scales.data(), n, f, y.data(), false);
          k->dequantize(q.data(), scales.data(), n, f, acc.data(), true);
          ExpectSameBits(y, ref_y, what + " dequantized");
          ExpectSameBits(acc, ref_acc, what + " accumulated");
          ++cases;
        }
      }
    }
  }
  std::printf("%d cases over %zu ISA variants\n", cases, tables.size());
}

TEST(Quantize, TheRoundTripIsWithinHalfAScalePerElement) {
  for (int bits : {8, 4}) {
    const QuantFormat f{bits, 256};
    const int64_t n = 256 * 40 + 17;
    const std::vector<float> x = Inputs(n, f.block, 99u + static_cast<uint32_t>(bits));
    std::vector<float> scales(static_cast<size_t>(QuantScales(n, f)));
    std::vector<uint8_t> q(static_cast<size_t>(QuantPayloadBytes(n, f)));
    const KernelTable& k = kernels::ActiveKernels();
    k.quantize(x.data(), n, f, scales.data(), q.data());
    std::vector<float> y(static_cast<size_t>(n));
    k.dequantize(q.data(), scales.data(), n, f, y.data(), false);
    double worst = 0;  // the largest error as a fraction of its block's scale
    for (int64_t i = 0; i < n; ++i) {
      const float s = scales[static_cast<size_t>(i / f.block)];
      const float err = std::fabs(x[static_cast<size_t>(i)] - y[static_cast<size_t>(i)]);
      if (s == 0.0f) {
        ASSERT_LE(err, std::ldexp(1.0f, -120)) << "element " << i;  // a zero or sub-2^-120 block
        continue;
      }
      ASSERT_LE(err, QuantErrorBound(s)) << "bits " << bits << " element " << i << " x " << x[i] << " scale " << s;
      worst = std::max(worst, static_cast<double>(err / s));
    }
    // Rounding to nearest does reach half a scale on random data.
    EXPECT_GT(worst, 0.45) << "bits " << bits;
    std::printf("bits %d: worst error %.6f of a scale (bound 0.5 + 1e-4)\n", bits, worst);
  }
}

TEST(Quantize, NonFiniteBlocksDequantizeToNaNAndOnlyThem) {
  const QuantFormat f{8, 4};
  std::vector<float> x = {1, 2, 3, 4, 1, std::numeric_limits<float>::infinity(), 3, 4, 5, 6, NAN, 8, -1, -2, -3, -4};
  const int64_t n = static_cast<int64_t>(x.size());
  for (const KernelTable* k : Tables()) {
    std::vector<float> scales(4);
    std::vector<uint8_t> q(16);
    k->quantize(x.data(), n, f, scales.data(), q.data());
    std::vector<float> y(16);
    k->dequantize(q.data(), scales.data(), n, f, y.data(), false);
    for (int i = 0; i < 16; ++i) {
      const bool bad_block = i / 4 == 1 || i / 4 == 2;
      EXPECT_EQ(std::isnan(y[i]), bad_block) << kernels::IsaName(k->isa) << " element " << i;
    }
    EXPECT_EQ(y[3], 4.0f);  // amax 4: q = 127, back to 4 exactly
  }
}

TEST(Quantize, BadFormatsAreNamed) {
  EXPECT_NE(CheckQuantFormat({5, 2048}).find("must be 8 or 4, got 5"), std::string::npos);
  EXPECT_NE(CheckQuantFormat({8, 0}).find(">= 1 element"), std::string::npos);
  EXPECT_NE(CheckQuantFormat({4, 33}).find("must be even, got 33"), std::string::npos);
  EXPECT_EQ(QuantWireBytes(4096, {8, 2048}), 4096 + 8);
  EXPECT_EQ(QuantWireBytes(4097, {4, 2048}), 2049 + 12);
}

}  // namespace
}  // namespace zt::ops
