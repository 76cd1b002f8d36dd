// Implementation of ckpt/format/dtype_convert.h.
#include "ckpt/format/dtype_convert.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace zt::ckpt {

uint16_t FloatToBFloat16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);                                                      // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

float BFloat16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {
    // Subnormal half (or zero): the value is M * 2^(e - 150) with M the
    // 24-bit significand; in units of 2^-24 that is M >> (126 - e), rounded
    // to nearest even on the bits shifted out. Below 2^-25 it is 0.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
    uint32_t q = m >> shift;
    const uint32_t r = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (r > half || (r == half && (q & 1u))) ++q;  // may carry into the smallest normal: still right
    return static_cast<uint16_t>(sign | q);
  }
  // Normal: rebias the exponent (127 -> 15) and round the fraction.
  uint32_t h = ((abs >> 13) - (112u << 10));
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exp = 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      bits = sign | ((exp + 112u) << 23) | (mant << 13);
    }
  } else if (exp == 0x1fu) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

namespace {

double Load(DType d, const void* src, size_t i) {
  switch (d) {
    case DType::kFloat32: return static_cast<const float*>(src)[i];
    case DType::kFloat64: return static_cast<const double*>(src)[i];
    case DType::kFloat16: return HalfToFloat(static_cast<const uint16_t*>(src)[i]);
    case DType::kBFloat16: return BFloat16ToFloat(static_cast<const uint16_t*>(src)[i]);
    default: return 0;
  }
}

void Store(DType d, void* dst, size_t i, double v) {
  switch (d) {
    case DType::kFloat32: static_cast<float*>(dst)[i] = static_cast<float>(v); break;
    case DType::kFloat64: static_cast<double*>(dst)[i] = v; break;
    case DType::kFloat16: static_cast<uint16_t*>(dst)[i] = FloatToHalf(static_cast<float>(v)); break;
    case DType::kBFloat16: static_cast<uint16_t*>(dst)[i] = FloatToBFloat16(static_cast<float>(v)); break;
    default: break;
  }
}

}  // namespace

absl::Status ConvertElements(DType from, const void* src, DType to, void* dst, size_t n) {
  if (from == to) {
    std::memmove(dst, src, n * DTypeSize(from));
    return absl::OkStatus();
  }
  if (!IsFloating(from) || !IsFloating(to)) {
    return absl::InvalidArgumentError(absl::StrCat("cannot convert ", std::string(DTypeName(from)), " to ",
                                                   std::string(DTypeName(to)), " (only floating types convert)"));
  }
  // fp64 -> fp32 rounds once; fp64 -> bf16/fp16 goes through fp32 (twice).
  // Checkpoints never hold fp64 parameters, so that double rounding is moot.
  if (from == DType::kFloat32) {
    const float* s = static_cast<const float*>(src);
    if (to == DType::kBFloat16) {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = FloatToBFloat16(s[i]);
      return absl::OkStatus();
    }
    if (to == DType::kFloat16) {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = FloatToHalf(s[i]);
      return absl::OkStatus();
    }
  }
  for (size_t i = 0; i < n; ++i) Store(to, dst, i, Load(from, src, i));
  return absl::OkStatus();
}

}  // namespace zt::ckpt
