// What a benchmark ran on: the BLAS actually loaded, CPU model, core and
// thread counts. Benchmarks print SystemInfoLine() first, because numbers
// from a reference BLAS (about 8x slower than OpenBLAS) are not comparable.
#pragma once

#include <cstdint>
#include <string>

namespace zt {

// Path of the BLAS library mapped into this process ("libopenblas..." or
// "libblas.so.3 (reference)"), read from /proc/self/maps; "none loaded" if
// no BLAS is mapped yet.
std::string LoadedBlasLibrary();

// The kernel set OpenBLAS chose for this CPU ("Haswell", "SkylakeX",
// "Cooperlake", ...; OPENBLAS_CORETYPE overrides it), or "" when the loaded
// BLAS is not OpenBLAS. Results that depend on rounding can differ between
// kernel sets, so benchmarks and test logs print it.
std::string BlasCoreName();

// This machine's host name (gethostname), or `fallback` where it cannot be read.
std::string HostName(const char* fallback);

// "Intel(R) Xeon(R) ..." from /proc/cpuinfo, or "unknown".
std::string CpuModel();

// The thread count an OMP_NUM_THREADS value asks for when it is one positive
// integer ("4"); 0 for null, empty, a list ("4,2") or anything else.
int PlainThreadCount(const char* omp_num_threads);

// One line: cpu, online cores, OMP_NUM_THREADS, BLAS (and its core type).
std::string SystemInfoLine();

// This process's peak resident memory in bytes (VmHWM of /proc/self/status:
// the current program's own peak, not counting what a parent had before
// exec, unlike getrusage's ru_maxrss); -1 when unavailable.
int64_t PeakResidentBytes();

// This process's resident memory now (VmRSS); -1 when unavailable.
int64_t CurrentResidentBytes();

// Hands memory the C heap holds but no longer uses back to the kernel
// (glibc's malloc_trim; a no-op elsewhere). Freed blocks below 32 MiB stay in
// the heap otherwise, so a phase that frees gigabytes in small pieces (building
// a model and moving its shards to NVMe) would keep them resident.
void ReturnFreedHeapMemory();

// Memory the kernel could give new allocations without swapping
// (MemAvailable of /proc/meminfo); -1 when unavailable.
int64_t AvailableMemoryBytes();

// The most memory this process may still take, and what sets that bound:
// the host's MemAvailable, the memory cgroup it runs in (v2 memory.max -
// memory.current, or v1 memory.limit_in_bytes - usage_in_bytes, for every
// level up to the root), and its RLIMIT_AS less what it has mapped,
// whichever is least. `bytes` is -1 when none is known.
struct MemoryBound {
  int64_t bytes = -1;
  std::string source;  // "available on this host", "left under the cgroup /x's memory.max of 3 GiB", ...
};
MemoryBound ProcessMemoryBound();
// The same with the files read under `proc_root` and `cgroup_root` (tests).
MemoryBound ProcessMemoryBoundAt(const std::string& proc_root, const std::string& cgroup_root);

}  // namespace zt
