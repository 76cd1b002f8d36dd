// Implementation of zero/scratch_pool.h.
#include "zero/scratch_pool.h"

#include <ATen/ATen.h>

namespace zt::zero {

at::Tensor ScratchPool::Acquire(int64_t numel, const at::TensorOptions& options, bool zeroed) {
  // Best fit among free buffers of the same dtype and device; else grow the
  // smallest free one of that kind, else add a buffer.
  Slot* best = nullptr;
  Slot* grow = nullptr;
  for (Slot& s : slots_) {
    if (s.in_use || s.storage.scalar_type() != options.dtype().toScalarType() ||
        s.storage.device() != options.device()) {
      continue;
    }
    if (s.storage.numel() >= numel) {
      if (best == nullptr || s.storage.numel() < best->storage.numel()) best = &s;
    } else if (grow == nullptr || s.storage.numel() < grow->storage.numel()) {
      grow = &s;
    }
  }
  if (best == nullptr) {
    if (grow == nullptr) {
      slots_.push_back(Slot());
      grow = &slots_.back();
    }
    if (grow->storage.defined()) held_bytes_ -= static_cast<int64_t>(grow->storage.nbytes());
    grow->storage = at::empty({numel}, options);
    held_bytes_ += static_cast<int64_t>(grow->storage.nbytes());
    best = grow;
  }
  best->in_use = true;
  at::Tensor out = best->storage.narrow(0, 0, numel);
  if (zeroed) out.zero_();
  return out;
}

void ScratchPool::Release(const at::Tensor& t) {
  if (!t.defined()) return;
  for (Slot& s : slots_) {
    if (s.in_use && s.storage.data_ptr() == t.data_ptr()) {
      s.in_use = false;
      return;
    }
  }
}

}  // namespace zt::zero
