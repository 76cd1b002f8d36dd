// The block quantization kernels (ops/kernels.h, QuantFormat), one template
// source included by kernels_<isa>.cc after ops/kernel_loops.h. The same
// rules apply: builtins only, no inline library functions (see there).
//
// Everything that decides a bit is integer or IEEE float arithmetic that
// every ISA performs alike: |x| and the block's maximum on the float bits
// (for non-negative floats the integer order is the float order, and
// infinities and NaNs are the largest patterns, which is how a non-finite
// block is found in the same pass), rounding to nearest even by adding and
// subtracting 1.5 * 2^23 (exact for |y| <= 2^22; here |y| <= 127.5), and
// -ffp-contract=off keeps products and sums separately rounded. GCC
// vectorises the per-block loops (the maximum, quantize and dequantize) in
// every variant.
#pragma once

#include <cstdint>

#include "ops/kernels.h"

#ifndef ZT_KERNEL_NS
#error "define ZT_KERNEL_NS (the variant's namespace) before including ops/quant_loops.h"
#endif

namespace zt::ops::kernels::ZT_KERNEL_NS {

inline constexpr float kRoundMagic = 12582912.0f;   // 1.5 * 2^23
inline constexpr uint32_t kTinyBits = 0x03800000u;  // 2^-120: smaller blocks quantize to 0

inline uint32_t AbsMaxBits(const float* __restrict x, int64_t n) {
  uint32_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t b = __builtin_bit_cast(uint32_t, x[i]) & 0x7FFFFFFFu;
    m = b > m ? b : m;
  }
  return m;
}

// q = clamp(round_even(x * inv), -qmax, qmax).
inline float QuantizeOne(float x, float inv, float qmax) {
  float y = x * inv;
  y = (y + kRoundMagic) - kRoundMagic;
  y = y > qmax ? qmax : y;
  return y < -qmax ? -qmax : y;
}

inline void QuantizeInt8Block(const float* __restrict x, int64_t n, float inv, int8_t* __restrict q) {
  for (int64_t i = 0; i < n; ++i) q[i] = static_cast<int8_t>(static_cast<int32_t>(QuantizeOne(x[i], inv, 127.0f)));
}

inline void QuantizeInt4Block(const float* __restrict x, int64_t n, float inv, uint8_t* __restrict q) {
  const int64_t pairs = n / 2;
  for (int64_t j = 0; j < pairs; ++j) {
    const int32_t lo = static_cast<int32_t>(QuantizeOne(x[2 * j], inv, 7.0f));
    const int32_t hi = static_cast<int32_t>(QuantizeOne(x[2 * j + 1], inv, 7.0f));
    q[j] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
  }
  if (n % 2 != 0) q[pairs] = static_cast<uint8_t>(static_cast<int32_t>(QuantizeOne(x[n - 1], inv, 7.0f)) & 0xF);
}

void Quantize(const float* x, int64_t n, QuantFormat f, float* scales, uint8_t* payload) {
  const float qmax = f.bits == 8 ? 127.0f : 7.0f;
  for (int64_t b = 0, k = 0; b < n; b += f.block, ++k) {
    const int64_t len = n - b < f.block ? n - b : f.block;
    uint8_t* q = payload + (f.bits == 8 ? b : b / 2);
    const int64_t bytes = f.bits == 8 ? len : (len + 1) / 2;
    const uint32_t amax_bits = AbsMaxBits(x + b, len);
    if (amax_bits >= 0x7F800000u || amax_bits < kTinyBits) {
      // Non-finite: NaN, so dequantizing cannot hide it; all zeros (or
      // below 2^-120, where qmax / amax would overflow): 0.
      scales[k] = amax_bits < kTinyBits ? 0.0f : __builtin_nanf("");
      for (int64_t i = 0; i < bytes; ++i) q[i] = 0;
      continue;
    }
    const float amax = __builtin_bit_cast(float, amax_bits);
    scales[k] = amax / qmax;
    const float inv = qmax / amax;
    if (f.bits == 8) {
      QuantizeInt8Block(x + b, len, inv, reinterpret_cast<int8_t*>(q));
    } else {
      QuantizeInt4Block(x + b, len, inv, q);
    }
  }
}

inline void DequantizeInt8Block(const int8_t* __restrict q, int64_t n, float scale, float* __restrict y, bool add) {
  if (add) {
    for (int64_t i = 0; i < n; ++i) y[i] = y[i] + static_cast<float>(q[i]) * scale;
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(q[i]) * scale;
  }
}

// The nibbles sign-extended: (int8)(b << 4) >> 4 is the low one, (int8)b >> 4 the high.
inline float LowNibble(uint8_t b) { return static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(b << 4)) >> 4); }
inline float HighNibble(uint8_t b) { return static_cast<float>(static_cast<int8_t>(b) >> 4); }

inline void DequantizeInt4Block(const uint8_t* __restrict q, int64_t n, float scale, float* __restrict y, bool add) {
  const int64_t pairs = n / 2;
  if (add) {
    for (int64_t j = 0; j < pairs; ++j) {
      y[2 * j] = y[2 * j] + LowNibble(q[j]) * scale;
      y[2 * j + 1] = y[2 * j + 1] + HighNibble(q[j]) * scale;
    }
    if (n % 2 != 0) y[n - 1] = y[n - 1] + LowNibble(q[pairs]) * scale;
  } else {
    for (int64_t j = 0; j < pairs; ++j) {
      y[2 * j] = LowNibble(q[j]) * scale;
      y[2 * j + 1] = HighNibble(q[j]) * scale;
    }
    if (n % 2 != 0) y[n - 1] = LowNibble(q[pairs]) * scale;
  }
}

void Dequantize(const uint8_t* payload, const float* scales, int64_t n, QuantFormat f, float* y, bool accumulate) {
  for (int64_t b = 0, k = 0; b < n; b += f.block, ++k) {
    const int64_t len = n - b < f.block ? n - b : f.block;
    if (f.bits == 8) {
      DequantizeInt8Block(reinterpret_cast<const int8_t*>(payload + b), len, scales[k], y + b, accumulate);
    } else {
      DequantizeInt4Block(payload + b / 2, len, scales[k], y + b, accumulate);
    }
  }
}

}  // namespace zt::ops::kernels::ZT_KERNEL_NS
