// The one template source of the optimizer kernels (ops/kernels.h), included
// by kernels_generic.cc, kernels_avx2.cc and kernels_avx512.cc, each compiled
// with its own -m flags. Internal to ops/; include nowhere else.
//
// Every name lives in namespace zt::ops::kernels::ZT_KERNEL_NS (the including
// file defines it), and nothing here calls an inline function of the standard
// library or c10: an inline function instantiated in two of these files would
// be one weak symbol, and the linker could hand the AVX-512 copy to the
// generic path. Builtins (__builtin_sqrtf, __builtin_bit_cast) and intrinsics
// only.
//
// Vectorisation (checked with -fopt-info-vec and objdump on GCC 12): every
// instance of the update loops (Adam, SGD, Adagrad, Lion; with fp32 or bf16
// gradients and fp32 / bf16 / no `out` inlined into them), the split
// update's loops (AdamMomentsLoop, LionMomentsLoop, ApplyIncrementLoop), the standalone
// conversion loops and the fp32 copies are auto-vectorised: xmm in the
// generic build, ymm with -mavx2 (vsqrtps / vdivps / vcvtps2pd ymm), zmm
// with -mavx512f and -mprefer-vector-width=512. GCC also vectorises the
// bit-twiddling fp16 conversions below, but cannot turn them into F16C's
// single instruction, so the AVX2 and AVX-512 builds convert fp16 with
// intrinsics (vcvtph2ps / vcvtps2ph, 8 or 16 lanes) and use the portable
// code only for the last < 8 or < 16 elements of a tile.
#pragma once

#include <cstdint>

#include "ops/kernels.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

#ifndef ZT_KERNEL_NS
#error "define ZT_KERNEL_NS (the variant's namespace) before including ops/kernel_loops.h"
#endif

namespace zt::ops::kernels::ZT_KERNEL_NS {

inline uint32_t Bits(float f) { return __builtin_bit_cast(uint32_t, f); }
inline float FromBits(uint32_t u) { return __builtin_bit_cast(float, u); }

// ---- Conversions. Bit-exact copies of c10's scalar algorithms, written so
// that GCC vectorises them; the F16C paths return the same bits (IEEE
// round-to-nearest-even; NaNs are canonicalised first, see NarrowF16). ----

// fp16 -> fp32, c10::detail::fp16_ieee_to_fp32_value: exact for every input;
// a signalling NaN comes back quiet with its payload, like vcvtph2ps.
inline float HalfToFloat(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const float normalized = FromBits((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
  const float denormalized = FromBits((two_w >> 17) | (126u << 23)) - 0.5f;
  // Selects through an all-ones mask: a ?: here ends up as a branch GCC
  // does not vectorise ("control flow in loop").
  const uint32_t is_denormal = 0u - static_cast<uint32_t>(two_w < (1u << 27));
  const uint32_t magnitude = (Bits(denormalized) & is_denormal) | (Bits(normalized) & ~is_denormal);
  return FromBits(sign | magnitude);
}

// fp32 -> fp16 rounded to nearest even, c10::detail::fp16_ieee_from_fp32_value:
// overflow becomes inf, NaN becomes sign | 0x7E00 (payload dropped).
inline uint16_t FloatToHalf(float f) {
  const float abs = __builtin_fabsf(f);
  float base = (abs * 0x1.0p+112f) * 0x1.0p-110f;
  const uint32_t w = Bits(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t exponent = shl1_w & 0xFF000000u;
  const uint32_t small = 0u - static_cast<uint32_t>(exponent < 0x71000000u);
  const uint32_t bias = (0x71000000u & small) | (exponent & ~small);
  base = FromBits((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = Bits(base);
  const uint32_t nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
  const uint32_t is_nan = 0u - static_cast<uint32_t>(shl1_w > 0xFF000000u);
  return static_cast<uint16_t>((sign >> 16) | (0x7E00u & is_nan) | (nonsign & ~is_nan));
}

// fp32 -> bf16 rounded to nearest even (c10::BFloat16's bias trick; inf stays
// inf, a finite value may round up to inf); NaN becomes `nan_bits`.
// The NaN test compares as signed: both sides are below 2^31, so it is the
// same test, and AVX2 has a signed 32-bit compare but no unsigned one (GCC
// otherwise spends a max and an equality compare per vector on it).
inline uint16_t FloatToBf16(float f, uint16_t nan_bits) {
  const uint32_t u = Bits(f);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const int32_t magnitude = static_cast<int32_t>(u & 0x7FFFFFFFu);
  return magnitude > 0x7F800000 ? nan_bits : static_cast<uint16_t>(rounded);
}

void WidenBf16(const uint16_t* __restrict src, float* __restrict dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = FromBits(static_cast<uint32_t>(src[i]) << 16);
}

void WidenF16(const uint16_t* __restrict src, float* __restrict dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    // The all-lanes maskz form: GCC 12's plain _mm512_cvtph_ps trips
    // -Wmaybe-uninitialized on its own _mm512_undefined_ps().
    _mm512_storeu_ps(dst + i, _mm512_maskz_cvtph_ps(0xFFFF, h));
  }
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
#endif
  for (; i < n; ++i) dst[i] = HalfToFloat(src[i]);
}

void CopyF32(const float* __restrict src, float* __restrict dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}

void NarrowBf16(const float* __restrict src, uint16_t* __restrict dst, int64_t n, uint16_t nan_bits) {
  for (int64_t i = 0; i < n; ++i) dst[i] = FloatToBf16(src[i], nan_bits);
}

// vcvtps2ph keeps (part of) a NaN's payload where c10 writes sign | 0x7E00,
// so NaN lanes are first replaced by sign | 0x7FC00000 (quiet, no payload),
// which it converts to exactly sign | 0x7E00. Rounding: nearest even.
void NarrowF16(const float* __restrict src, uint16_t* __restrict dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 sign_mask = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(0x80000000u)));
  const __m512 quiet_nan = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000));
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(src + i);
    const __mmask16 is_nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    const __m512 canonical = _mm512_or_ps(_mm512_and_ps(x, sign_mask), quiet_nan);
    const __m512 y = _mm512_mask_blend_ps(is_nan, x, canonical);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm512_maskz_cvtps_ph(0xFFFF, y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
#elif defined(__F16C__)
  const __m256 sign_mask = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u)));
  const __m256 quiet_nan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000));
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(src + i);
    const __m256 is_nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    const __m256 canonical = _mm256_or_ps(_mm256_and_ps(x, sign_mask), quiet_nan);
    const __m256 y = _mm256_blendv_ps(x, canonical, is_nan);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
#endif
  for (; i < n; ++i) dst[i] = FloatToHalf(src[i]);
}

void Widen(const void* src, DType dtype, float* dst, int64_t n) {
  switch (dtype) {
    case DType::kFloat32: CopyF32(static_cast<const float*>(src), dst, n); return;
    case DType::kBFloat16: WidenBf16(static_cast<const uint16_t*>(src), dst, n); return;
    case DType::kFloat16: WidenF16(static_cast<const uint16_t*>(src), dst, n); return;
  }
}

void Narrow(const float* src, ParamOut out, int64_t n) {
  switch (out.dtype) {
    case DType::kFloat32: CopyF32(src, static_cast<float*>(out.data), n); return;
    case DType::kBFloat16: NarrowBf16(src, static_cast<uint16_t*>(out.data), n, out.bf16_nan); return;
    case DType::kFloat16: NarrowF16(src, static_cast<uint16_t*>(out.data), n); return;
  }
}

// ---- The tile driver shared by all optimizers. ----

// How a loop reads the gradient (G) and writes `out` (O). fp32 and bf16 are
// read and written inside the update loop itself (a bf16 conversion is a few
// integer ops that vectorise), so every array is touched once, interleaved,
// as in a streaming kernel; on our AVX2 machine this was as fast as or
// faster than separate conversion passes over L1-resident tiles, and the
// fused step's extra cost is the conversion arithmetic (~0.3 ns/element).
// fp16 goes through an L1-resident tile buffer converted by F16C (or the
// scalar code) before / after the update loop, as GCC cannot emit F16C from
// plain code. As G and O, uint16_t always means bf16 bits.
struct NoOut {};

// std::is_same_v without including the standard library here (see banner).
template <typename A, typename B>
struct IsSame {
  static constexpr bool value = false;
};
template <typename A>
struct IsSame<A, A> {
  static constexpr bool value = true;
};

inline float LoadGrad(float g) { return g; }
inline float LoadGrad(uint16_t bf16) { return FromBits(static_cast<uint32_t>(bf16) << 16); }

inline void StoreOut(NoOut* /*out*/, int64_t /*i*/, float /*p*/, uint16_t /*nan_bits*/) {}
inline void StoreOut(float* out, int64_t i, float p, uint16_t /*nan_bits*/) { out[i] = p; }
inline void StoreOut(uint16_t* out, int64_t i, float p, uint16_t nan_bits) { out[i] = FloatToBf16(p, nan_bits); }

// Calls update(offset, g, out, len) on each tile of [0, n): g points at the
// tile's gradient as G (float or bf16 bits; fp16 gradients arrive widened into a
// stack buffer, exactly, so scaling afterwards equals scaling during the
// conversion), out at the tile's rounded copy as O (NoOut when there is none
// or it is fp16; an fp16 copy is rounded from the updated tile afterwards,
// while it is still in L1).
template <typename G, typename O, typename Update>
void TileLoop(const float* p, GradIn g, ParamOut out, int64_t n, const Update& update) {
  alignas(64) float widened[kTile];
  for (int64_t begin = 0; begin < n; begin += kTile) {
    const int64_t len = n - begin < kTile ? n - begin : kTile;
    const G* tile_g;
    if constexpr (IsSame<G, uint16_t>::value) {
      tile_g = static_cast<const G*>(g.data) + begin;
    } else if (g.dtype == DType::kFloat16) {
      WidenF16(static_cast<const uint16_t*>(g.data) + begin, widened, len);
      tile_g = widened;
    } else {
      tile_g = static_cast<const float*>(g.data) + begin;
    }
    O* tile_out = nullptr;
    if constexpr (!IsSame<O, NoOut>::value) tile_out = static_cast<O*>(out.data) + begin;
    update(begin, tile_g, tile_out, len);
    if (out.data != nullptr && out.dtype == DType::kFloat16) {
      NarrowF16(p + begin, static_cast<uint16_t*>(out.data) + begin, len);
    }
  }
}

template <typename G, typename Update>
void TileLoopForOut(const float* p, GradIn g, ParamOut out, int64_t n, const Update& update) {
  if (out.data == nullptr || out.dtype == DType::kFloat16) {
    TileLoop<G, NoOut>(p, g, out, n, update);
  } else if (out.dtype == DType::kBFloat16) {
    TileLoop<G, uint16_t>(p, g, out, n, update);
  } else {
    TileLoop<G, float>(p, g, out, n, update);
  }
}

// `update` is a generic lambda: it is instantiated for each (G, O) pair.
template <typename Update>
void ForEachTile(const float* p, GradIn g, ParamOut out, int64_t n, const Update& update) {
  if (g.dtype == DType::kBFloat16) {
    TileLoopForOut<uint16_t>(p, g, out, n, update);
  } else {
    TileLoopForOut<float>(p, g, out, n, update);
  }
}

// ---- Optimizer loops: straight-line float arithmetic on restrict pointers,
// one element per iteration, vectorised by the compiler. G and O as above. ----

// Coefficients rounded to float once per call. Per-element work then stays in
// float, which is what torch.optim does on fp32 tensors.
struct AdamFloat {
  float grad_scale;
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float step_size;     // lr / bias_correction1
  float inv_sqrt_bc2;  // 1 / sqrt(bias_correction2)
  float eps;
  float l2;     // weight decay folded into the gradient (Adam)
  float decay;  // 1 - lr * weight_decay (AdamW)
  uint16_t bf16_nan;
};

template <bool kDecoupled, typename G, typename O>
void AdamLoop(float* __restrict p, const G* __restrict g, float* __restrict m, float* __restrict v, O* __restrict out,
              int64_t n, const AdamFloat k) {
  for (int64_t i = 0; i < n; ++i) {
    float pi = p[i];
    float gi = LoadGrad(g[i]) * k.grad_scale;
    if constexpr (kDecoupled) {
      pi = pi * k.decay;
    } else {
      gi = gi + k.l2 * pi;
    }
    const float mi = k.beta1 * m[i] + k.one_minus_beta1 * gi;
    const float vi = k.beta2 * v[i] + k.one_minus_beta2 * (gi * gi);
    const float denom = __builtin_sqrtf(vi) * k.inv_sqrt_bc2 + k.eps;
    m[i] = mi;
    v[i] = vi;
    const float updated = pi - k.step_size * (mi / denom);
    p[i] = updated;
    StoreOut(out, i, updated, k.bf16_nan);
  }
}

// The float coefficients of one call, rounded once (the fused and the split
// kernels share them, so they round alike).
AdamFloat MakeAdamFloat(double grad_scale, const AdamCoeffs& c, uint16_t bf16_nan) {
  return AdamFloat{
      static_cast<float>(grad_scale),
      static_cast<float>(c.beta1),
      static_cast<float>(1.0 - c.beta1),
      static_cast<float>(c.beta2),
      static_cast<float>(1.0 - c.beta2),
      static_cast<float>(c.lr / c.bias_correction1),
      static_cast<float>(1.0 / __builtin_sqrt(c.bias_correction2)),
      static_cast<float>(c.eps),
      static_cast<float>(c.weight_decay),
      static_cast<float>(1.0 - c.lr * c.weight_decay),
      bf16_nan,
  };
}

void AdamStep(float* p, GradIn g, float* m, float* v, ParamOut out, int64_t n, const AdamCoeffs& c) {
  const AdamFloat k = MakeAdamFloat(g.scale, c, out.bf16_nan);
  if (c.decoupled) {
    ForEachTile(p, g, out, n, [&](int64_t b, const auto* tile_g, auto* tile_out, int64_t len) {
      AdamLoop<true>(p + b, tile_g, m + b, v + b, tile_out, len, k);
    });
  } else {
    ForEachTile(p, g, out, n, [&](int64_t b, const auto* tile_g, auto* tile_out, int64_t len) {
      AdamLoop<false>(p + b, tile_g, m + b, v + b, tile_out, len, k);
    });
  }
}

// The split AdamW (decoupled decay only): AdamMoments reads the fp32
// gradient at g_inc, updates m and v, and overwrites the gradient with the
// step's increment step_size * (m / denom); ApplyIncrement (below) then
// computes p * decay - increment. The same float operations in the same
// order as AdamLoop<true>, so the two passes return its bits exactly.
void AdamMomentsLoop(float* __restrict g_inc, float* __restrict m, float* __restrict v, int64_t n, const AdamFloat k) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g_inc[i] * k.grad_scale;
    const float mi = k.beta1 * m[i] + k.one_minus_beta1 * gi;
    const float vi = k.beta2 * v[i] + k.one_minus_beta2 * (gi * gi);
    const float denom = __builtin_sqrtf(vi) * k.inv_sqrt_bc2 + k.eps;
    m[i] = mi;
    v[i] = vi;
    g_inc[i] = k.step_size * (mi / denom);
  }
}

void AdamMoments(float* g_inc, double grad_scale, float* m, float* v, int64_t n, const AdamCoeffs& c) {
  AdamMomentsLoop(g_inc, m, v, n, MakeAdamFloat(grad_scale, c, kBf16QuietNaN));
}

struct SgdFloat {
  float grad_scale, lr, weight_decay, momentum, one_minus_dampening;
  uint16_t bf16_nan;
};

// kMomentum=false ignores buf. kFirst initialises buf with d (torch clones
// the first gradient into the buffer instead of decaying a zero buffer).
template <bool kMomentum, bool kNesterov, bool kFirst, typename G, typename O>
void SgdLoop(float* __restrict p, const G* __restrict g, float* __restrict buf, O* __restrict out, int64_t n,
             const SgdFloat k) {
  for (int64_t i = 0; i < n; ++i) {
    const float pi = p[i];
    const float d = LoadGrad(g[i]) * k.grad_scale + k.weight_decay * pi;
    float updated;
    if constexpr (!kMomentum) {
      updated = pi - k.lr * d;
    } else {
      float b;
      if constexpr (kFirst) {
        b = d;
      } else {
        b = k.momentum * buf[i] + k.one_minus_dampening * d;
      }
      buf[i] = b;
      if constexpr (kNesterov) {
        updated = pi - k.lr * (d + k.momentum * b);
      } else {
        updated = pi - k.lr * b;
      }
    }
    p[i] = updated;
    StoreOut(out, i, updated, k.bf16_nan);
  }
}

template <bool kMomentum, bool kNesterov, bool kFirst>
void SgdTiles(float* p, GradIn g, float* buf, ParamOut out, int64_t n, const SgdFloat& k) {
  ForEachTile(p, g, out, n, [&](int64_t b, const auto* tile_g, auto* tile_out, int64_t len) {
    SgdLoop<kMomentum, kNesterov, kFirst>(p + b, tile_g, kMomentum ? buf + b : nullptr, tile_out, len, k);
  });
}

void SgdStep(float* p, GradIn g, float* buf, ParamOut out, int64_t n, const SgdCoeffs& c) {
  const SgdFloat k{static_cast<float>(g.scale),           static_cast<float>(c.lr),
                   static_cast<float>(c.weight_decay),    static_cast<float>(c.momentum),
                   static_cast<float>(1.0 - c.dampening), out.bf16_nan};
  if (c.momentum == 0.0) {
    SgdTiles<false, false, false>(p, g, buf, out, n, k);
  } else if (c.nesterov) {
    if (c.first_step) {
      SgdTiles<true, true, true>(p, g, buf, out, n, k);
    } else {
      SgdTiles<true, true, false>(p, g, buf, out, n, k);
    }
  } else if (c.first_step) {
    SgdTiles<true, false, true>(p, g, buf, out, n, k);
  } else {
    SgdTiles<true, false, false>(p, g, buf, out, n, k);
  }
}

struct AdagradFloat {
  float grad_scale, lr, eps, weight_decay;
  uint16_t bf16_nan;
};

template <typename G, typename O>
void AdagradLoop(float* __restrict p, const G* __restrict g, float* __restrict sum, O* __restrict out, int64_t n,
                 const AdagradFloat k) {
  for (int64_t i = 0; i < n; ++i) {
    const float pi = p[i];
    const float gi = LoadGrad(g[i]) * k.grad_scale + k.weight_decay * pi;
    const float s = sum[i] + gi * gi;
    sum[i] = s;
    const float updated = pi - k.lr * (gi / (__builtin_sqrtf(s) + k.eps));
    p[i] = updated;
    StoreOut(out, i, updated, k.bf16_nan);
  }
}

void AdagradStep(float* p, GradIn g, float* sum, ParamOut out, int64_t n, const AdagradCoeffs& c) {
  const AdagradFloat k{static_cast<float>(g.scale), static_cast<float>(c.lr), static_cast<float>(c.eps),
                       static_cast<float>(c.weight_decay), out.bf16_nan};
  ForEachTile(p, g, out, n, [&](int64_t b, const auto* tile_g, auto* tile_out, int64_t len) {
    AdagradLoop(p + b, tile_g, sum + b, tile_out, len, k);
  });
}

struct LionFloat {
  float grad_scale;
  double beta1, one_minus_beta1;  // the sign's argument is formed in double
  float beta2, one_minus_beta2, lr, decay;
  uint16_t bf16_nan;
};

template <typename G, typename O>
void LionLoop(float* __restrict p, const G* __restrict g, float* __restrict m, O* __restrict out, int64_t n,
              const LionFloat k) {
  for (int64_t i = 0; i < n; ++i) {
    const float mi = m[i];
    const float gi = LoadGrad(g[i]) * k.grad_scale;
    const double u = k.beta1 * static_cast<double>(mi) + k.one_minus_beta1 * static_cast<double>(gi);
    // Written as two selects: GCC does not vectorise the bool-to-int form.
    const float sign = (u > 0.0 ? 1.0f : 0.0f) - (u < 0.0 ? 1.0f : 0.0f);
    const float updated = p[i] * k.decay - k.lr * sign;
    p[i] = updated;
    m[i] = k.beta2 * mi + k.one_minus_beta2 * gi;
    StoreOut(out, i, updated, k.bf16_nan);
  }
}

LionFloat MakeLionFloat(double grad_scale, const LionCoeffs& c, uint16_t bf16_nan) {
  return LionFloat{static_cast<float>(grad_scale),
                   c.beta1,
                   1.0 - c.beta1,
                   static_cast<float>(c.beta2),
                   static_cast<float>(1.0 - c.beta2),
                   static_cast<float>(c.lr),
                   static_cast<float>(1.0 - c.lr * c.weight_decay),
                   bf16_nan};
}

void LionStep(float* p, GradIn g, float* m, ParamOut out, int64_t n, const LionCoeffs& c) {
  const LionFloat k = MakeLionFloat(g.scale, c, out.bf16_nan);
  ForEachTile(p, g, out, n, [&](int64_t b, const auto* tile_g, auto* tile_out, int64_t len) {
    LionLoop(p + b, tile_g, m + b, tile_out, len, k);
  });
}

// The split Lion: LionMoments updates m and overwrites the fp32 gradient
// with lr * sign(c); ApplyIncrement then computes p * decay - increment,
// LionLoop's operations in its order.
void LionMomentsLoop(float* __restrict g_inc, float* __restrict m, int64_t n, const LionFloat k) {
  for (int64_t i = 0; i < n; ++i) {
    const float mi = m[i];
    const float gi = g_inc[i] * k.grad_scale;
    const double u = k.beta1 * static_cast<double>(mi) + k.one_minus_beta1 * static_cast<double>(gi);
    const float sign = (u > 0.0 ? 1.0f : 0.0f) - (u < 0.0 ? 1.0f : 0.0f);
    m[i] = k.beta2 * mi + k.one_minus_beta2 * gi;
    g_inc[i] = k.lr * sign;
  }
}

void LionMoments(float* g_inc, double grad_scale, float* m, int64_t n, const LionCoeffs& c) {
  LionMomentsLoop(g_inc, m, n, MakeLionFloat(grad_scale, c, kBf16QuietNaN));
}

// The second pass of a split update: p <- p * (1 - lr * weight_decay) -
// increment, the decay rounded to float as AdamStep and LionStep round it.
void ApplyIncrementLoop(float* __restrict p, const float* __restrict inc, int64_t n, const float decay) {
  for (int64_t i = 0; i < n; ++i) p[i] = p[i] * decay - inc[i];
}

void ApplyIncrement(float* p, const float* inc, int64_t n, double lr, double weight_decay) {
  ApplyIncrementLoop(p, inc, n, static_cast<float>(1.0 - lr * weight_decay));
}

}  // namespace zt::ops::kernels::ZT_KERNEL_NS
