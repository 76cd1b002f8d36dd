// Implementation of ops/quantize.h.
#include "ops/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"

namespace zt::ops {

std::string CheckQuantFormat(const QuantFormat& f) {
  if (f.bits != 8 && f.bits != 4) return absl::StrCat("quantization bits must be 8 or 4, got ", f.bits);
  if (f.block < 1) return absl::StrCat("the quantization block must hold >= 1 element, got ", f.block);
  if (f.bits == 4 && f.block % 2 != 0) {
    return absl::StrCat("4-bit quantization packs two elements per byte: the block must be even, got ", f.block);
  }
  return "";
}

void QuantizeReference(const float* x, int64_t n, const QuantFormat& f, float* scales, uint8_t* payload) {
  const float qmax = f.bits == 8 ? 127.0f : 7.0f;
  const float tiny = std::ldexp(1.0f, -120);
  for (int64_t b = 0, k = 0; b < n; b += f.block, ++k) {
    const int64_t len = std::min(f.block, n - b);
    float amax = 0;
    bool finite = true;
    for (int64_t i = 0; i < len; ++i) {
      finite = finite && std::isfinite(x[b + i]);
      amax = std::max(amax, std::fabs(x[b + i]));
    }
    std::vector<int32_t> q(static_cast<size_t>(len), 0);
    if (!finite) {
      scales[k] = std::numeric_limits<float>::quiet_NaN();
    } else if (amax < tiny) {
      scales[k] = 0.0f;
    } else {
      scales[k] = amax / qmax;
      const float inv = qmax / amax;
      for (int64_t i = 0; i < len; ++i) {
        const float y = std::nearbyint(x[b + i] * inv);  // the default mode: half to even
        q[static_cast<size_t>(i)] = static_cast<int32_t>(std::min(qmax, std::max(-qmax, y)));
      }
    }
    if (f.bits == 8) {
      for (int64_t i = 0; i < len; ++i) {
        payload[b + i] = static_cast<uint8_t>(static_cast<int8_t>(q[static_cast<size_t>(i)]));
      }
    } else {
      for (int64_t i = 0; i < len; i += 2) {
        const int32_t lo = q[static_cast<size_t>(i)], hi = i + 1 < len ? q[static_cast<size_t>(i + 1)] : 0;
        payload[b / 2 + i / 2] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
      }
    }
  }
}

void DequantizeReference(const uint8_t* payload, const float* scales, int64_t n, const QuantFormat& f, float* y,
                         bool accumulate) {
  for (int64_t i = 0; i < n; ++i) {
    int32_t q;
    if (f.bits == 8) {
      q = static_cast<int8_t>(payload[i]);
    } else {
      const uint8_t byte = payload[i / 2];
      const int32_t nibble = i % 2 == 0 ? (byte & 0xF) : (byte >> 4);
      q = nibble >= 8 ? nibble - 16 : nibble;
    }
    const float v = static_cast<float>(q) * scales[i / f.block];
    y[i] = accumulate ? y[i] + v : v;
  }
}

}  // namespace zt::ops
