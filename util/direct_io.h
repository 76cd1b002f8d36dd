// Direct I/O for large streaming transfers (checkpoint files, exports):
// O_DIRECT moves the bytes between the disk and the process's own buffers,
// with no copy through the page cache and no cache pages to allocate.
//
// Why: a checkpoint tool reads and writes gigabytes once. Through the page
// cache every byte is copied twice by the kernel into freshly allocated
// cache pages; on a virtual machine whose host reclaims freed guest memory,
// each of those first touches is a host page fault, and a 4 GB conversion
// measured 85% of its CPU time in those two copies (0.3-0.4 GB/s, against
// 1.0-1.3 GB/s for the same copy with O_DIRECT). Reused aligned buffers are
// touched once.
//
// Contracts: offsets, lengths and memory of an O_DIRECT transfer are
// multiples of kDirectAlignment (4 KiB, which covers the logical block size
// of every common device); the helpers here arrange that with aligned
// bounce buffers, so callers pass any offset, length and memory. Where a
// filesystem refuses O_DIRECT (tmpfs, some FUSE mounts: EINVAL), callers
// fall back to ordinary buffered I/O; the data is the same either way.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace zt {

// The O_DIRECT unit, here and for NVMe offload's swap files (offload/io_engine.h).
inline constexpr size_t kDirectAlignment = 4096;

inline constexpr uint64_t AlignDown(uint64_t v, uint64_t a = kDirectAlignment) { return v / a * a; }
inline constexpr uint64_t AlignUp(uint64_t v, uint64_t a = kDirectAlignment) { return (v + a - 1) / a * a; }

// Heap memory aligned to kDirectAlignment, freed on destruction.
class AlignedBlock {
 public:
  AlignedBlock() = default;
  // Aborts (as operator new would throw) when the memory cannot be had.
  explicit AlignedBlock(size_t bytes);
  char* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(char* p) const;
  };
  std::unique_ptr<char, Free> data_;
  size_t size_ = 0;
};

// The largest piece one direct read moves through a bounce buffer.
inline constexpr size_t kDirectReadPiece = 2u << 20;
// A DirectPRead of n bytes runs min(kDirectReadStreams, n / kDirectReadStretch)
// reads at once (a disk needs several requests in flight to stream).
inline constexpr size_t kDirectReadStreams = 4;
inline constexpr size_t kDirectReadStretch = 2u << 20;

// Reads n bytes at `offset` of a file open with O_DIRECT (`direct_fd`) into
// `dst` (any address), kDirectReadPiece at a time through bounce buffers
// borrowed from a process-wide pool (thread-safe; buffers are reused, so
// they stay backed by memory), large reads in several streams at once. Returns 0, an errno (EINVAL: the filesystem
// refused O_DIRECT here; the caller reads buffered instead), or -1 when the
// file ended before offset + n.
int DirectPRead(int direct_fd, void* dst, size_t n, uint64_t offset);

// Writes n bytes (a multiple of kDirectAlignment, from kDirectAlignment-
// aligned memory) at an aligned `offset` of a file open with O_DIRECT.
// Returns 0 or the errno (a zero-byte write counts as EIO).
int DirectPWrite(int direct_fd, const char* src, size_t n, uint64_t offset);

}  // namespace zt
