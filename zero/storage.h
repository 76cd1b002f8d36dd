// Freeing and re-allocating the memory behind a flat parameter buffer while
// every view of it (the module's parameters, tensors autograd saved) stays
// valid: the same trick FSDP uses (storage resize to 0 and back).
//
// Contract: `flat` is a contiguous tensor at storage offset 0 that owns its
// storage. FreeStorage returns the memory to the allocator; views keep their
// shapes but must not be read until AllocateStorage gives the storage its
// bytes back (contents unspecified until written). Not thread-safe per tensor.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace zt::zero {

// True while the storage holds at least `flat.nbytes()` bytes.
bool HasStorage(const at::Tensor& flat);
// Drops the storage's memory (no-op when already freed).
void FreeStorage(const at::Tensor& flat);
// Gives the storage `flat.nbytes()` fresh bytes (no-op when it has them).
void AllocateStorage(const at::Tensor& flat);

}  // namespace zt::zero
