// The per-ISA kernel tables, one per kernels_<isa>.cc; ops/kernels.cc picks
// among them at run time. Internal to ops/: everyone else goes through
// kernels::KernelsFor / ActiveKernels, which check that the CPU can run them.
#pragma once

#include "ops/kernels.h"

namespace zt::ops::kernels::internal {

// Always built: the baseline ISA of the target.
const KernelTable& GenericKernels();

#if defined(ZT_OPS_X86_VARIANTS)
// Built on x86-64 only. Calling into them on a CPU without the features
// raises SIGILL, hence the checks in kernels.cc.
const KernelTable& Avx2Kernels();
const KernelTable& Avx512Kernels();
#endif

}  // namespace zt::ops::kernels::internal
