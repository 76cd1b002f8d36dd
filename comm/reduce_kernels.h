// Element-wise reductions of several equally long buffers, used by the Gloo
// reduce-scatter and all-reduce. Half types (bf16, fp16) accumulate in fp32
// and round once, so the result is the same as summing in fp32 in rank order.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <vector>

#include "comm/process_group.h"

namespace zt::comm {

// Dtypes ReduceInto supports: fp32, fp64, bf16, fp16, int32, int64.
bool IsReducibleDType(c10::ScalarType dtype);

// dst[i] = op(srcs[0][i], srcs[1][i], ...) in source order, for i < count;
// with kAvg the sum is divided by `avg_divisor` before rounding. Integer
// sums wrap on overflow; kAvg is for floating types only. NaN propagates
// through kMax/kMin. `dst` may be one of `srcs` (same pointer), not a
// partial overlap.
void ReduceInto(void* dst, const std::vector<const void*>& srcs, int64_t count, c10::ScalarType dtype, ReduceOp op,
                int avg_divisor);

}  // namespace zt::comm
