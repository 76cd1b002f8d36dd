// Implementation of comm/reduce_kernels.h: blocked loops (an accumulator
// block stays in L1 while each source streams through it), vectorized by the
// compiler (this file is built with -O3) in a Haswell clone chosen at run
// time; halves convert through c10's inline bit conversions.
#include "comm/reduce_kernels.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "util/status.h"

namespace zt::comm {
namespace {

constexpr int64_t kBlock = 1024;

// The hot loops are plain functions compiled twice (AVX2+F16C+FMA for
// Haswell and newer, and the baseline); the loader picks one at run time, so
// the binary stays portable. Each works on one L1-resident block.
// Under ThreadSanitizer the clones are off: GCC instruments the ifunc
// resolver it generates, which the loader runs before TSan's runtime is
// initialized, and the process dies at start (found by the TSan build).
#if defined(__SANITIZE_THREAD__)
#define ZT_SIMD_CLONES
#else
#define ZT_SIMD_CLONES __attribute__((target_clones("arch=haswell", "default")))
#endif

template <typename T>
using AccOf = std::conditional_t<std::is_same_v<T, c10::BFloat16> || std::is_same_v<T, c10::Half>, float, T>;

// acc[i] = x[i] (converted to the accumulator type).
template <typename T>
inline void LoadBlock(AccOf<T>* acc, const T* x, int64_t len) {
  for (int64_t i = 0; i < len; ++i) acc[i] = static_cast<AccOf<T>>(x[i]);
}
// acc[i] += x[i].
template <typename T>
inline void AddBlock(AccOf<T>* acc, const T* x, int64_t len) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;  // two's complement wrap, no UB
    for (int64_t i = 0; i < len; ++i) acc[i] = static_cast<T>(static_cast<U>(acc[i]) + static_cast<U>(x[i]));
  } else {
    for (int64_t i = 0; i < len; ++i) acc[i] += static_cast<AccOf<T>>(x[i]);
  }
}
// out[i] = acc[i] / divisor (divisor 1: plain store), rounded once.
template <typename T>
inline void StoreBlock(T* out, const AccOf<T>* acc, int64_t len, int divisor) {
  if constexpr (std::is_floating_point_v<AccOf<T>>) {
    if (divisor != 1) {
      const AccOf<T> d = static_cast<AccOf<T>>(divisor);
      for (int64_t i = 0; i < len; ++i) out[i] = static_cast<T>(acc[i] / d);
      return;
    }
  }
  for (int64_t i = 0; i < len; ++i) out[i] = static_cast<T>(acc[i]);
}

#define ZT_DEFINE_BLOCK_KERNELS(T, Name)                                                                \
  ZT_SIMD_CLONES void Load##Name(AccOf<T>* acc, const T* x, int64_t len) { LoadBlock<T>(acc, x, len); } \
  ZT_SIMD_CLONES void Add##Name(AccOf<T>* acc, const T* x, int64_t len) { AddBlock<T>(acc, x, len); }   \
  ZT_SIMD_CLONES void Store##Name(T* out, const AccOf<T>* acc, int64_t len, int divisor) {              \
    StoreBlock<T>(out, acc, len, divisor);                                                              \
  }

ZT_DEFINE_BLOCK_KERNELS(float, F32)
ZT_DEFINE_BLOCK_KERNELS(double, F64)
ZT_DEFINE_BLOCK_KERNELS(c10::BFloat16, BF16)
ZT_DEFINE_BLOCK_KERNELS(c10::Half, F16)
ZT_DEFINE_BLOCK_KERNELS(int32_t, I32)
ZT_DEFINE_BLOCK_KERNELS(int64_t, I64)

// fp16 <-> fp32 with F16C (8 lanes at a time): GCC does not vectorize c10's
// scalar conversion. Rounding is to nearest even, as c10::Half's.
__attribute__((target("avx2,f16c"))) void LoadF16C(float* acc, const c10::Half* x, int64_t len) {
  int64_t i = 0;
  for (; i + 8 <= len; i += 8) {
    _mm256_storeu_ps(acc + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  }
  for (; i < len; ++i) acc[i] = _cvtsh_ss(x[i].x);
}
__attribute__((target("avx2,f16c"))) void AddF16C(float* acc, const c10::Half* x, int64_t len) {
  int64_t i = 0;
  for (; i + 8 <= len; i += 8) {
    __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), v));
  }
  for (; i < len; ++i) acc[i] += _cvtsh_ss(x[i].x);
}
__attribute__((target("avx2,f16c"))) void StoreF16C(c10::Half* out, const float* acc, int64_t len, int divisor) {
  const __m256 d = _mm256_set1_ps(static_cast<float>(divisor));
  int64_t i = 0;
  for (; i + 8 <= len; i += 8) {
    __m256 v = _mm256_loadu_ps(acc + i);
    if (divisor != 1) v = _mm256_div_ps(v, d);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < len; ++i) {
    const float v = divisor != 1 ? acc[i] / static_cast<float>(divisor) : acc[i];
    out[i].x = _cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT);
  }
}
const bool kHasF16C = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");

template <typename T>
struct Kernels;
#define ZT_KERNELS(T, Name)                                                                   \
  template <>                                                                                 \
  struct Kernels<T> {                                                                         \
    static void Load(AccOf<T>* a, const T* x, int64_t n) { Load##Name(a, x, n); }             \
    static void Add(AccOf<T>* a, const T* x, int64_t n) { Add##Name(a, x, n); }               \
    static void Store(T* o, const AccOf<T>* a, int64_t n, int d) { Store##Name(o, a, n, d); } \
  };
ZT_KERNELS(float, F32)
ZT_KERNELS(double, F64)
ZT_KERNELS(c10::BFloat16, BF16)
template <>
struct Kernels<c10::Half> {
  static void Load(float* a, const c10::Half* x, int64_t n) { kHasF16C ? LoadF16C(a, x, n) : LoadF16(a, x, n); }
  static void Add(float* a, const c10::Half* x, int64_t n) { kHasF16C ? AddF16C(a, x, n) : AddF16(a, x, n); }
  static void Store(c10::Half* o, const float* a, int64_t n, int d) {
    kHasF16C ? StoreF16C(o, a, n, d) : StoreF16(o, a, n, d);
  }
};
ZT_KERNELS(int32_t, I32)
ZT_KERNELS(int64_t, I64)

template <typename A>
A MinMax(A acc, A x, ReduceOp op) {
  if constexpr (std::is_floating_point_v<A>) {
    if (op == ReduceOp::kMax) return (x > acc || std::isnan(x)) ? x : acc;
    return (x < acc || std::isnan(x)) ? x : acc;
  } else {
    if (op == ReduceOp::kMax) return x > acc ? x : acc;
    return x < acc ? x : acc;
  }
}

template <typename T>
void ReduceTyped(T* dst, const std::vector<const void*>& srcs, int64_t count, ReduceOp op, int avg_divisor) {
  using A = AccOf<T>;
  using K = Kernels<T>;
  const size_t n = srcs.size();
  alignas(64) A acc[kBlock];
  const bool sum = (op == ReduceOp::kSum || op == ReduceOp::kAvg);
  const int divisor = (op == ReduceOp::kAvg) ? avg_divisor : 1;
  for (int64_t base = 0; base < count; base += kBlock) {
    const int64_t len = std::min(kBlock, count - base);
    K::Load(acc, static_cast<const T*>(srcs[0]) + base, len);
    for (size_t j = 1; j < n; ++j) {
      const T* s = static_cast<const T*>(srcs[j]) + base;
      if (sum) {
        K::Add(acc, s, len);
      } else {
        for (int64_t i = 0; i < len; ++i) acc[i] = MinMax<A>(acc[i], static_cast<A>(s[i]), op);
      }
    }
    K::Store(dst + base, acc, len, divisor);
  }
}

}  // namespace

bool IsReducibleDType(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::Float:
    case c10::ScalarType::Double:
    case c10::ScalarType::BFloat16:
    case c10::ScalarType::Half:
    case c10::ScalarType::Int:
    case c10::ScalarType::Long: return true;
    default: return false;
  }
}

void ReduceInto(void* dst, const std::vector<const void*>& srcs, int64_t count, c10::ScalarType dtype, ReduceOp op,
                int avg_divisor) {
  ZT_CHECK(!srcs.empty());
  ZT_CHECK(avg_divisor > 0);
  if (count <= 0) return;
  switch (dtype) {
    case c10::ScalarType::Float: return ReduceTyped(static_cast<float*>(dst), srcs, count, op, avg_divisor);
    case c10::ScalarType::Double: return ReduceTyped(static_cast<double*>(dst), srcs, count, op, avg_divisor);
    case c10::ScalarType::BFloat16: return ReduceTyped(static_cast<c10::BFloat16*>(dst), srcs, count, op, avg_divisor);
    case c10::ScalarType::Half: return ReduceTyped(static_cast<c10::Half*>(dst), srcs, count, op, avg_divisor);
    case c10::ScalarType::Int:
      ZT_CHECK(op != ReduceOp::kAvg);
      return ReduceTyped(static_cast<int32_t*>(dst), srcs, count, op, avg_divisor);
    case c10::ScalarType::Long:
      ZT_CHECK(op != ReduceOp::kAvg);
      return ReduceTyped(static_cast<int64_t*>(dst), srcs, count, op, avg_divisor);
    default: ZT_CHECK_MSG(false, "ReduceInto: unsupported dtype %s", c10::toString(dtype));
  }
}

}  // namespace zt::comm
