// Implementation of comm/reduce_kernels.h: blocked loops (an accumulator
// block stays in L1 while each source streams through it), which the
// compiler vectorizes for fp32/fp64/ints; halves convert through c10's
// scalar conversions.
#include "comm/reduce_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "util/status.h"

namespace zt::comm {
namespace {

constexpr int64_t kBlock = 512;

// Accumulator type: float for halves, the type itself otherwise.
template <typename T>
using AccOf = std::conditional_t<std::is_same_v<T, c10::BFloat16> || std::is_same_v<T, c10::Half>,
                                 float, T>;

template <typename A>
A Combine(A acc, A x, ReduceOp op) {
  if constexpr (std::is_floating_point_v<A>) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: return acc + x;
      case ReduceOp::kMax: return (x > acc || std::isnan(x)) ? x : acc;
      case ReduceOp::kMin: return (x < acc || std::isnan(x)) ? x : acc;
    }
  } else {
    using U = std::make_unsigned_t<A>;
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: return static_cast<A>(static_cast<U>(acc) + static_cast<U>(x));
      case ReduceOp::kMax: return x > acc ? x : acc;
      case ReduceOp::kMin: return x < acc ? x : acc;
    }
  }
  return acc;
}

template <typename T>
void ReduceTyped(T* dst, const std::vector<const void*>& srcs, int64_t count, ReduceOp op,
                 int avg_divisor) {
  using A = AccOf<T>;
  const size_t n = srcs.size();
  A acc[kBlock];
  for (int64_t base = 0; base < count; base += kBlock) {
    const int64_t len = std::min(kBlock, count - base);
    const T* s0 = static_cast<const T*>(srcs[0]) + base;
    for (int64_t i = 0; i < len; ++i) acc[i] = static_cast<A>(s0[i]);
    for (size_t j = 1; j < n; ++j) {
      const T* s = static_cast<const T*>(srcs[j]) + base;
      if (op == ReduceOp::kSum || op == ReduceOp::kAvg) {
        // Kept separate from Combine so the common case vectorizes.
        if constexpr (std::is_floating_point_v<A>) {
          for (int64_t i = 0; i < len; ++i) acc[i] += static_cast<A>(s[i]);
        } else {
          for (int64_t i = 0; i < len; ++i) acc[i] = Combine<A>(acc[i], s[i], ReduceOp::kSum);
        }
      } else {
        for (int64_t i = 0; i < len; ++i) acc[i] = Combine<A>(acc[i], static_cast<A>(s[i]), op);
      }
    }
    if constexpr (std::is_floating_point_v<A>) {
      if (op == ReduceOp::kAvg) {
        const A d = static_cast<A>(avg_divisor);
        for (int64_t i = 0; i < len; ++i) acc[i] = acc[i] / d;
      }
    }
    T* out = dst + base;
    for (int64_t i = 0; i < len; ++i) out[i] = static_cast<T>(acc[i]);
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

void ReduceInto(void* dst, const std::vector<const void*>& srcs, int64_t count,
                c10::ScalarType dtype, ReduceOp op, int avg_divisor) {
  ZT_CHECK(!srcs.empty());
  ZT_CHECK(avg_divisor > 0);
  if (count <= 0) return;
  switch (dtype) {
    case c10::ScalarType::Float:
      return ReduceTyped(static_cast<float*>(dst), srcs, count, op, avg_divisor);
    case c10::ScalarType::Double:
      return ReduceTyped(static_cast<double*>(dst), srcs, count, op, avg_divisor);
    case c10::ScalarType::BFloat16:
      return ReduceTyped(static_cast<c10::BFloat16*>(dst), srcs, count, op, avg_divisor);
    case c10::ScalarType::Half:
      return ReduceTyped(static_cast<c10::Half*>(dst), srcs, count, op, avg_divisor);
    case c10::ScalarType::Int:
      ZT_CHECK(op != ReduceOp::kAvg);
      return ReduceTyped(static_cast<int32_t*>(dst), srcs, count, op, avg_divisor);
    case c10::ScalarType::Long:
      ZT_CHECK(op != ReduceOp::kAvg);
      return ReduceTyped(static_cast<int64_t*>(dst), srcs, count, op, avg_divisor);
    default:
      ZT_CHECK_MSG(false, "ReduceInto: unsupported dtype %s", c10::toString(dtype));
  }
}

}  // namespace zt::comm
