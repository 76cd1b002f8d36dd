// The baseline build of the optimizer kernels (ops/kernel_loops.h): no -m
// flags, so it runs on every CPU of the target architecture (SSE2 on x86-64).
// Reference point of the bit-identity tests for the other variants.
#define ZT_KERNEL_NS generic
#include "ops/kernel_loops.h"
#include "ops/kernel_variants.h"
#include "ops/quant_loops.h"

namespace zt::ops::kernels::internal {

const KernelTable& GenericKernels() {
  static constexpr KernelTable kTable = {Isa::kGeneric,           generic::AdamStep,    generic::SgdStep,
                                         generic::AdagradStep,    generic::LionStep,    generic::Widen,
                                         generic::Narrow,         generic::AdamMoments, generic::LionMoments,
                                         generic::ApplyIncrement, generic::Quantize,    generic::Dequantize};
  return kTable;
}

}  // namespace zt::ops::kernels::internal
