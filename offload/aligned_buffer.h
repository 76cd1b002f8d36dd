// Host memory for swap I/O: kIoAlignment-aligned (what O_DIRECT needs) and
// owned (RAII), and a bounded pool of equal buffers.
//
// A pool registers its buffers with the I/O engine (RegisterWith), so the
// kernel pins their pages once for the pool's life rather than per transfer.
//
// The pool is how NVMe offload keeps its promise not to exhaust host RAM (a
// DeepSpeed complaint): every swap buffer comes from a pool whose size the
// config sets (buffer_count x buffer_size) and which never grows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "offload/io_engine.h"

namespace zt::offload {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // ResourceExhausted (naming the size) when the allocation fails. The size
  // is rounded up to kIoAlignment. Memory is not zeroed.
  static absl::StatusOr<AlignedBuffer> Allocate(size_t bytes);

  void* data() const { return data_.get(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> data_;
  size_t size_ = 0;
};

// `count` buffers of `bytes_each` bytes, allocated up front. Not thread-safe:
// one owner (a swapper on the training thread) acquires and releases.
class BufferPool {
 public:
  // InvalidArgument for count < 1 or bytes_each == 0; ResourceExhausted when
  // host memory runs out. bytes_each is rounded up to kIoAlignment.
  static absl::StatusOr<std::unique_ptr<BufferPool>> Create(int count, size_t bytes_each);

  // A free buffer's index, or -1 when all are in use (the caller must wait
  // for one of its own transfers to finish and Release it).
  int TryAcquire();
  // Gives back a buffer from TryAcquire; releasing one twice aborts.
  void Release(int index);
  void* data(int index) const;
  size_t buffer_bytes() const { return bytes_each_; }
  int count() const { return static_cast<int>(buffers_.size()); }
  int in_use() const { return in_use_; }
  int peak_in_use() const { return peak_in_use_; }
  uint64_t total_bytes() const { return static_cast<uint64_t>(bytes_each_) * buffers_.size(); }

  // Registers every buffer with `io` (IoEngine::Register), until the pool is
  // destroyed; `io` must outlive the pool, and the pool's owner must have
  // waited for its transfers before destroying it (it must anyway). Where
  // the engine refuses, the buffers are used unregistered.
  void RegisterWith(IoEngine& io);

 private:
  BufferPool() = default;
  size_t bytes_each_ = 0;
  std::vector<AlignedBuffer> buffers_;
  std::vector<int> free_;
  int in_use_ = 0;
  int peak_in_use_ = 0;
  // After buffers_, so destroyed before the memory they name is freed.
  std::vector<IoRegistration> registrations_;
};

}  // namespace zt::offload
