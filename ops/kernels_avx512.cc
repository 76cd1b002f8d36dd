// The AVX-512 build of the optimizer kernels (ops/kernel_loops.h): 512-bit
// vectors (F, BW, VL, DQ; F16C for fp16), no FMA contraction. x86-64 only;
// ops/kernels.cc calls it only on CPUs (and OSes) with all four extensions.
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || !defined(__AVX512DQ__) || \
    !defined(__F16C__)
#error "kernels_avx512.cc must be compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq (see ops/CMakeLists.txt)"
#endif

#define ZT_KERNEL_NS avx512
#include "ops/kernel_loops.h"
#include "ops/kernel_variants.h"
#include "ops/quant_loops.h"

namespace zt::ops::kernels::internal {

const KernelTable& Avx512Kernels() {
  static constexpr KernelTable kTable = {Isa::kAvx512,           avx512::AdamStep,    avx512::SgdStep,
                                         avx512::AdagradStep,    avx512::LionStep,    avx512::Widen,
                                         avx512::Narrow,         avx512::AdamMoments, avx512::LionMoments,
                                         avx512::ApplyIncrement, avx512::Quantize,    avx512::Dequantize};
  return kTable;
}

}  // namespace zt::ops::kernels::internal
