// Freeing and re-allocating the memory behind a flat parameter buffer while
// every view of it (the module's parameters, tensors autograd saved) stays
// valid: the same trick FSDP uses (storage resize to 0 and back).
//
// Contract: `flat` is a contiguous tensor at storage offset 0 that owns its
// storage. FreeStorage returns the memory to the allocator; views keep their
// shapes but must not be read until a StoragePool fills the storage again
// (contents unspecified until written). Not thread-safe per tensor.
//
// StoragePool keeps freed buffers for the next gather: on CPU, glibc
// hands multi-MiB blocks back to the kernel on free, and touching a fresh
// block faults every page in again (a 1.3x slower stage-3 step here).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>

#include <cstdint>
#include <vector>

namespace zt::zero {

// True while the storage holds at least `flat.nbytes()` bytes.
bool HasStorage(const at::Tensor& flat);
// Drops the storage's memory (no-op when already freed).
void FreeStorage(const at::Tensor& flat);
// Points the storage at `data` (at least flat.nbytes() bytes) without owning
// it: memory a swap buffer pool lends (parameter offload). FreeStorage gives
// it back; the lender must outlive the loan.
void BorrowStorage(const at::Tensor& flat, void* data);

// Buffers taken from freed flat tensors, handed to the next ones that need
// memory. It only ever holds buffers that were in use at once, so it is
// bounded by the most bytes gathered at the same time. Not thread-safe.
class StoragePool {
 public:
  // Gives `flat` a pooled buffer of at least its size (at most twice, so a
  // small chunk never pins a large block), or a fresh one.
  void Fill(const at::Tensor& flat);
  // Moves `flat`'s memory into the pool (no-op when it has none).
  void Drain(const at::Tensor& flat);
  // Frees every pooled buffer.
  void Clear();
  // Bytes of the idle buffers the pool holds.
  int64_t held_bytes() const { return held_bytes_; }

 private:
  struct Buffer {
    size_t capacity = 0;
    at::DataPtr data;
  };
  std::vector<Buffer> free_;
  // Capacity of the buffer each filled storage holds (it may exceed nbytes).
  std::vector<std::pair<const void*, size_t>> capacity_;
  int64_t held_bytes_ = 0;
};

}  // namespace zt::zero
