// The AVX2 build of the optimizer kernels (ops/kernel_loops.h): 256-bit
// vectors, F16C for fp16, FMA enabled but never used (-ffp-contract=off).
// x86-64 only; ops/kernels.cc calls it only on CPUs with AVX2, FMA and F16C.
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "kernels_avx2.cc must be compiled with -mavx2 -mfma -mf16c (see ops/CMakeLists.txt)"
#endif

#define ZT_KERNEL_NS avx2
#include "ops/kernel_loops.h"
#include "ops/kernel_variants.h"
#include "ops/quant_loops.h"

namespace zt::ops::kernels::internal {

const KernelTable& Avx2Kernels() {
  static constexpr KernelTable kTable = {Isa::kAvx2,        avx2::AdamStep,       avx2::SgdStep,  avx2::AdagradStep,
                                         avx2::LionStep,    avx2::Widen,          avx2::Narrow,   avx2::AdamMoments,
                                         avx2::LionMoments, avx2::ApplyIncrement, avx2::Quantize, avx2::Dequantize};
  return kTable;
}

}  // namespace zt::ops::kernels::internal
