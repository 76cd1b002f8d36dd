// Implementation of util/direct_io.h.
#include "util/direct_io.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <future>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "util/status.h"

namespace zt {

void AlignedBlock::Free::operator()(char* p) const { std::free(p); }

AlignedBlock::AlignedBlock(size_t bytes) : size_(AlignUp(bytes)) {
  void* p = std::aligned_alloc(kDirectAlignment, size_);
  ZT_CHECK_MSG(p != nullptr, "cannot allocate %zu bytes of aligned I/O memory", size_);
  data_.reset(static_cast<char*>(p));
}

namespace {

// Bounce buffers for DirectPRead, kept for reuse: a transfer touches memory
// that is already backed instead of fresh pages every time. At most
// kKeep stay pooled (one per reading thread in practice); more are made
// when more threads read at once, and freed when they come back.
class BouncePool {
 public:
  // A piece plus the blocks its unaligned ends touch.
  static constexpr size_t kBytes = kDirectReadPiece + 2 * kDirectAlignment;
  static constexpr size_t kKeep = 2 * kDirectReadStreams;

  AlignedBlock Take() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (!free_.empty()) {
        AlignedBlock b = std::move(free_.back());
        free_.pop_back();
        return b;
      }
    }
    return AlignedBlock(kBytes);
  }
  void Give(AlignedBlock b) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (free_.size() < kKeep) free_.push_back(std::move(b));
  }

 private:
  absl::Mutex mu_;
  std::vector<AlignedBlock> free_ ABSL_GUARDED_BY(mu_);
};

BouncePool& Pool() {
  static BouncePool* pool = new BouncePool();  // never destroyed: readers may run during exit
  return *pool;
}

}  // namespace

namespace {

// One stretch of a DirectPRead, on the calling thread.
int ReadStretch(int direct_fd, void* dst, size_t n, uint64_t offset) {
  AlignedBlock bounce = Pool().Take();
  char* out = static_cast<char*>(dst);
  int err = 0;
  for (size_t done = 0; done < n && err == 0;) {
    const uint64_t at = offset + done;
    // A whole piece per request even when `at` is unaligned, and a rest of
    // at most one block more goes with it: trimming pieces to block
    // boundaries left a 4 KiB tail request per stretch, and behind a large
    // write in the disk's queue each tail cost 4-5 ms (a 4 GB conversion
    // spent a sixth of its time with no I/O in flight).
    const size_t left = n - done;
    const size_t take = left <= kDirectReadPiece + kDirectAlignment ? left : kDirectReadPiece;
    const uint64_t lo = AlignDown(at);
    const size_t span = static_cast<size_t>(AlignUp(at + take) - lo);
    size_t got = 0;
    while (got < span) {
      const ssize_t r = ::pread(direct_fd, bounce.data() + got, span - got, static_cast<off_t>(lo + got));
      if (r < 0) {
        if (errno == EINTR) continue;
        err = errno;
        break;
      }
      if (r == 0) break;  // end of file (the last block is short)
      got += static_cast<size_t>(r);
      // A short read that is not block-aligned can only be the file's end.
      if (got % kDirectAlignment != 0) break;
    }
    if (err != 0) break;
    const size_t skip = static_cast<size_t>(at - lo);
    if (got < skip + take) {
      err = -1;
      break;
    }
    std::memcpy(out + done, bounce.data() + skip, take);
    done += take;
  }
  Pool().Give(std::move(bounce));
  return err;
}

}  // namespace

int DirectPRead(int direct_fd, void* dst, size_t n, uint64_t offset) {
  // One synchronous request at a time leaves a disk idle between requests
  // (the page cache's readahead keeps several in flight): a large read is
  // cut at block boundaries into up to kDirectReadStreams stretches read at
  // once, about kDirectReadStretch each.
  const size_t streams = std::min<size_t>(kDirectReadStreams, n / kDirectReadStretch);
  if (streams < 2) return ReadStretch(direct_fd, dst, n, offset);
  std::vector<std::future<int>> others;
  char* out = static_cast<char*>(dst);
  uint64_t begin = offset;
  const uint64_t end = offset + n;
  for (size_t s = 0; s < streams; ++s) {
    const uint64_t stop = s + 1 == streams ? end : std::max(begin, AlignDown(offset + n / streams * (s + 1)));
    char* d = out + (begin - offset);
    const size_t len = static_cast<size_t>(stop - begin);
    if (s + 1 < streams) {
      others.push_back(std::async(std::launch::async, ReadStretch, direct_fd, d, len, begin));
    } else {
      int err = ReadStretch(direct_fd, d, len, begin);
      for (auto& f : others) {
        const int e = f.get();
        if (err == 0) err = e;
      }
      return err;
    }
    begin = stop;
  }
  return 0;  // not reached
}

int DirectPWrite(int direct_fd, const char* src, size_t n, uint64_t offset) {
  for (size_t done = 0; done < n;) {
    const ssize_t w = ::pwrite(direct_fd, src + done, n - done, static_cast<off_t>(offset + done));
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (w == 0) return EIO;
    done += static_cast<size_t>(w);
  }
  return 0;
}

}  // namespace zt
