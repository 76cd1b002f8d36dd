// A counting CPU allocator for tests and benchmarks: wraps LibTorch's CPU
// allocator and tracks the bytes currently allocated and the peak.
//
//   zt::InstallCountingCpuAllocator();     // once, before the tensors to count
//   zt::ResetCpuMemoryPeak();
//   ... train ...
//   zt::CpuMemoryCounters m = zt::CpuMemory();
//
// Only allocations made after installation are counted (earlier tensors free
// through their own deleter). Thread-safe. Not for production runs: every
// allocation takes a lock.
#pragma once

#include <cstdint>

namespace zt {

struct CpuMemoryCounters {
  int64_t current_bytes = 0;
  int64_t peak_bytes = 0;
  int64_t allocations = 0;
};

// Idempotent. Returns false if another allocator with higher priority is set.
bool InstallCountingCpuAllocator();
CpuMemoryCounters CpuMemory();
// Sets the peak to the current value.
void ResetCpuMemoryPeak();

}  // namespace zt
