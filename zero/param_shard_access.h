// ParamShardAccess: how the optimizer reaches the owned parameters of a
// group when they may be swapped out (stage-3 offload_param to NVMe). The
// coordinator implements it over its swap file; the optimizer only sees this
// interface, so neither header includes the other.
#pragma once

#include <ATen/core/Tensor.h>

namespace zt::zero {

// The owned parameters of a group when they may be swapped out (stage-3
// offload_param to NVMe). Acquire returns group g's owned parameters (model
// dtype, contiguous) resident until Release; with `read` they hold the
// current values, otherwise the caller overwrites every element. Release
// with `dirty` writes them back. Throws zt::Error on I/O failure.
class ParamShardAccess {
 public:
  virtual ~ParamShardAccess() = default;
  virtual at::Tensor Acquire(int g, bool read) = 0;
  virtual void Release(int g, bool dirty) = 0;
  // A hint that Acquire(g, /*read=*/true) comes soon: start bringing group
  // g's parameters in (or keep them, when here) where that takes nothing in
  // use. Never waits for a read. False when there is no room for it now (or
  // the source read ahead by an order of its own), so hints for groups
  // further ahead would be wasted.
  virtual bool Prefetch(int g) {
    (void)g;
    return true;
  }
};

}  // namespace zt::zero
