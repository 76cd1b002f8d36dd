// ScratchPool: reusable 1-D buffers for gradient reduction (stage-2 buckets,
// reduce-scatter outputs, communication-dtype casts).
//
// Allocating multi-MiB buffers every step is slow on CPU: glibc hands large
// blocks back to the kernel on free, so each step faults the pages in again.
// The pool keeps released buffers and hands them out again; it grows to the
// largest number of buffers in use at once (bounded by the reducer's
// in-flight limit), never beyond. Not thread-safe: the reducer's mutex guards it.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace zt::zero {

class ScratchPool {
 public:
  // A contiguous [numel] tensor of `options`' dtype/device. Its contents are
  // unspecified unless `zeroed`.
  at::Tensor Acquire(int64_t numel, const at::TensorOptions& options, bool zeroed);
  // Returns a tensor from Acquire to the pool. Others are ignored.
  void Release(const at::Tensor& t);
  // Bytes the pool holds (in use or free).
  int64_t held_bytes() const { return held_bytes_; }

 private:
  struct Slot {
    at::Tensor storage;
    bool in_use = false;
  };
  std::vector<Slot> slots_;
  int64_t held_bytes_ = 0;
};

}  // namespace zt::zero
