// Keeping a training step's freed C heap mapped between steps.
//
// glibc returns the free memory at the top of its main heap to the kernel
// once it exceeds the trim threshold (at most 64 MiB while the threshold
// adapts), and the next allocation there faults every page in again. A
// step's activations are allocated and freed in the same order every step;
// when nothing longer-lived sits above them in the heap they are given back
// after each backward and faulted in during the next forward. With stage-3
// parameter offload that is the case (the gathered parameters live in the
// swap buffers, not in the heap): the 42.8M-parameter benchmark model took
// 1,000-6,900 page faults per step and rank, about 10 ms of kernel time.
//
// The retention plan raises the trim threshold to twice the heap a step
// holds (measured once, while the first backward begins) and fixes the mmap
// threshold at glibc's own adaptive ceiling (32 MiB), so steady-state steps
// reuse their heap. Peak memory does not change: what stays mapped is what
// every step uses again; between steps the process keeps that peak.
//
// The user's own malloc settings win: with MALLOC_TRIM_THRESHOLD_,
// MALLOC_MMAP_THRESHOLD_, MALLOC_TOP_PAD_ or a malloc tunable in
// GLIBC_TUNABLES in the environment, the plan does nothing and says why.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace zt {

struct HeapRetentionPlan {
  bool apply = false;
  int64_t trim_threshold = 0;  // bytes (when apply)
  int64_t mmap_threshold = 0;  // bytes (when apply)
  std::string reason;          // why nothing is applied (when !apply)
};

// The plan for a main heap of `heap_bytes` (MainHeapBytes(); <= 0: unknown),
// reading the environment through `getenv` (std::getenv in production).
// Pure: tests give their own environment.
HeapRetentionPlan PlanHeapRetention(int64_t heap_bytes, const std::function<const char*(const char*)>& getenv);

// Sets the plan's thresholds (glibc's mallopt); false when it is not to be
// applied, the C library is not glibc, or glibc refuses a value.
bool ApplyHeapRetention(const HeapRetentionPlan& plan);

// Bytes the main heap has obtained from the kernel (glibc's mallinfo2
// arena); -1 elsewhere.
int64_t MainHeapBytes();

}  // namespace zt
