// Element conversions between the dtypes checkpoints move between (fp32
// masters, bf16/fp16 models, exports), without LibTorch. Rounding is to
// nearest even, as at::Tensor::to does; NaN stays NaN, overflow becomes inf.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "ckpt/format/dtype.h"

namespace zt::ckpt {

uint16_t FloatToBFloat16(float f);
float BFloat16ToFloat(uint16_t b);
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);

// Converts n elements from `src` (type `from`) to `dst` (type `to`).
// Floating types convert among themselves; other types only copy to
// themselves. Unsupported pairs are InvalidArgument.
absl::Status ConvertElements(DType from, const void* src, DType to, void* dst, size_t n);

}  // namespace zt::ckpt
