// AlignedBuffer and BufferPool: page-aligned host memory for O_DIRECT swap I/O
// and a fixed-size pool of it. The pool allocates everything in Create and
// never grows; running out is the caller's signal to wait, not to allocate.
#include "offload/aligned_buffer.h"

#include <cstdint>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "offload/io_engine.h"
#include "util/status.h"
#include "util/strings.h"

namespace zt::offload {

void AlignedBuffer::Free::operator()(void* p) const { std::free(p); }

absl::StatusOr<AlignedBuffer> AlignedBuffer::Allocate(size_t bytes) {
  AlignedBuffer buffer;
  if (bytes == 0) return buffer;
  if (bytes > SIZE_MAX - kIoAlignment) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate a swap buffer of ", bytes, " bytes"));
  }
  const size_t size = static_cast<size_t>(AlignUp(bytes));
  void* p = nullptr;
  // posix_memalign reports failure through its return value, not errno.
  int err = ::posix_memalign(&p, kIoAlignment, size);
  if (err != 0 || p == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate a swap buffer of ", HumanBytes(static_cast<double>(size)), " (", size,
                     " bytes, aligned to ", kIoAlignment, "): out of host memory; lower buffer_count or buffer_size"));
  }
  buffer.data_.reset(p);
  buffer.size_ = size;
  return buffer;
}

absl::StatusOr<std::unique_ptr<BufferPool>> BufferPool::Create(int count, size_t bytes_each) {
  if (count < 1) {
    return absl::InvalidArgumentError(absl::StrCat("a swap buffer pool needs at least 1 buffer, got ", count));
  }
  if (bytes_each == 0) return absl::InvalidArgumentError("a swap buffer pool needs buffers of at least 1 byte");
  std::unique_ptr<BufferPool> pool(new BufferPool());
  pool->buffers_.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    auto buffer = AlignedBuffer::Allocate(bytes_each);
    if (!buffer.ok()) {
      return absl::ResourceExhaustedError(absl::StrCat("swap buffer pool of ", count, " x ",
                                                       HumanBytes(static_cast<double>(bytes_each)), ": buffer ", i,
                                                       " failed: ", buffer.status().message()));
    }
    pool->buffers_.push_back(std::move(buffer).value());
  }
  pool->bytes_each_ = pool->buffers_.front().size();
  // A stack of free indices, lowest on top, so buffer 0 is handed out first.
  for (int i = count - 1; i >= 0; --i) pool->free_.push_back(i);
  return pool;
}

void BufferPool::RegisterWith(IoEngine& io) {
  registrations_.clear();
  for (const AlignedBuffer& b : buffers_) registrations_.push_back(io.Register(b.data(), b.size()));
}

int BufferPool::TryAcquire() {
  if (free_.empty()) return -1;
  int index = free_.back();
  free_.pop_back();
  ++in_use_;
  if (in_use_ > peak_in_use_) peak_in_use_ = in_use_;
  return index;
}

void BufferPool::Release(int index) {
  ZT_CHECK_MSG(index >= 0 && index < count(), "releasing buffer %d of a pool of %d", index, count());
  // A double release would hand one buffer to two transfers; the free list is
  // a few entries long, so the scan costs nothing.
  for (int f : free_) ZT_CHECK_MSG(f != index, "buffer %d released twice", index);
  free_.push_back(index);
  --in_use_;
}

void* BufferPool::data(int index) const {
  ZT_CHECK_MSG(index >= 0 && index < count(), "buffer %d of a pool of %d", index, count());
  return buffers_[static_cast<size_t>(index)].data();
}

}  // namespace zt::offload
