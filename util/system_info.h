// What a benchmark ran on: the BLAS actually loaded, CPU model, core and
// thread counts. Benchmarks print SystemInfoLine() first, because numbers
// from a reference BLAS (about 8x slower than OpenBLAS) are not comparable.
#pragma once

#include <string>

namespace zt {

// Path of the BLAS library mapped into this process ("libopenblas..." or
// "libblas.so.3 (reference)"), read from /proc/self/maps; "none loaded" if
// no BLAS is mapped yet.
std::string LoadedBlasLibrary();

// "Intel(R) Xeon(R) ..." from /proc/cpuinfo, or "unknown".
std::string CpuModel();

// One line: cpu, online cores, OMP_NUM_THREADS, BLAS.
std::string SystemInfoLine();

}  // namespace zt
