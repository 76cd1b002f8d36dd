// What the two IoEngine backends share: requests cut into pieces, tickets,
// the rules for applying one transfer result (short transfers, EOF, errno),
// and error messages with the source location. Not for use outside offload/.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "offload/io_engine.h"
#include "util/status.h"

namespace zt::offload::internal {

// "file.cc" from __FILE__, which the build may give as an absolute path.
const char* SourceBaseName(const char* file);

// "<what>: <strerror(err)> [file.cc:123]", with the code absl assigns to err.
absl::Status SysError(int err, const char* file, int line, const std::string& what);

// Returns SysError(errno) when `expr`, a POSIX call returning -1 on failure, fails.
#define ZT_IO_RETURN_IF_ERRNO(expr, what)                                                        \
  do {                                                                                           \
    if ((expr) < 0) return ::zt::offload::internal::SysError(errno, __FILE__, __LINE__, (what)); \
  } while (0)

// Aborts with file:line and the errno text when a liburing-style result is
// negative where no caller could recover (the ring itself is unusable, so the
// kernel may still own buffers and nothing can be released safely).
#define ZT_IO_CHECK_NONNEGATIVE(expr, what)                                                                           \
  do {                                                                                                                \
    const long zt_io_ret_ = static_cast<long>(expr);                                                                  \
    ZT_CHECK_MSG(zt_io_ret_ >= 0, "%s: %s", std::string(what).c_str(), std::strerror(static_cast<int>(-zt_io_ret_))); \
  } while (0)

// One Read or Write call. Owned by IoEngineBase until Wait collects it.
struct IoRequest {
  IoTicket ticket = 0;
  bool write = false;
  int fd = -1;
  std::string path;  // the swap file's, for messages
  uint64_t offset = 0;
  uint64_t bytes = 0;
  int64_t pieces_left = 0;  // guarded by IoEngineBase::mu_
  absl::Status status;      // the first error; guarded by IoEngineBase::mu_
};

// At most block_size contiguous bytes of one request, moved by one worker.
// After a short transfer, offset/buffer/left describe the remainder.
struct IoPiece {
  IoRequest* request = nullptr;
  uint64_t offset = 0;
  char* buffer = nullptr;
  uint64_t left = 0;
  int retries = 0;  // consecutive EINTR/EAGAIN results
  int fixed = -1;   // the registered buffer holding all of it (-1: none)
};

// Tickets, piece splitting and completion bookkeeping; a backend only moves
// pieces. Read/Write/Wait/WaitAll run on the caller's thread; Apply,
// InjectedErrno and FailPiece run on the backend's worker threads.
class IoEngineBase : public IoEngine {
 public:
  using IoEngine::Read;
  using IoEngine::Write;
  IoTicket Read(const SwapFile& file, uint64_t offset, void* buffer, uint64_t bytes, IoPriority priority) override;
  IoTicket Write(const SwapFile& file, uint64_t offset, const void* buffer, uint64_t bytes,
                 IoPriority priority) override;
  absl::Status Wait(IoTicket ticket) override ABSL_LOCKS_EXCLUDED(mu_);
  void Hurry(IoTicket ticket) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status WaitAll() override ABSL_LOCKS_EXCLUDED(mu_);
  bool Ready(IoTicket ticket) override ABSL_LOCKS_EXCLUDED(mu_);
  IoBackend backend() const override { return options_.backend; }
  const IoOptions& options() const override { return options_; }
  uint64_t bytes_read() const override { return bytes_read_.load(std::memory_order_relaxed); }
  uint64_t bytes_written() const override { return bytes_written_.load(std::memory_order_relaxed); }
  uint64_t requests_hurried() const override { return requests_hurried_.load(std::memory_order_relaxed); }
  IoRegistration Register(void* base, uint64_t bytes) override;
  uint64_t bytes_registered() const override { return bytes_registered_; }
  uint64_t pieces_fixed() const override { return pieces_fixed_.load(std::memory_order_relaxed); }

  // Applies one transfer result of `piece` (bytes moved, or -errno) at the
  // backend's source location. True when the piece is finished (done or
  // failed; its request has been told); false when `piece`, now describing
  // the remainder, must be submitted again.
  bool Apply(IoPiece& piece, int64_t result, const char* file, int line) ABSL_LOCKS_EXCLUDED(mu_);
  // The errno the test hook injects into this piece (0: none).
  int InjectedErrno(const IoPiece& piece) const;
  // Finishes `piece` with `status` without transferring it.
  void FailPiece(IoPiece& piece, const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

 protected:
  // `options` validated, with block_size rounded and the backend resolved.
  explicit IoEngineBase(const IoOptions& options) : options_(options) {
    for (int i = kMaxFixedBuffers - 1; i >= 0; --i) free_fixed_.push_back(i);  // entry 0 handed out first
  }
  // Hands a request's pieces for worker `worker` (0 .. threads-1) to the
  // backend, to start in PieceQueue's order. Runs on the caller's thread;
  // must not block on I/O.
  virtual void Enqueue(int worker, std::vector<IoPiece> pieces, IoPriority priority) = 0;
  // PieceQueue::Hurry(ticket) on worker `worker`'s queue; the pieces moved.
  // Caller's thread; must not block on I/O.
  virtual size_t HurryQueued(int worker, IoTicket ticket) = 0;
  // Makes [base, base + bytes) (at most kMaxFixedBufferBytes) fixed buffer
  // `index` (< kMaxFixedBuffers) of every worker; on failure nothing of it
  // stays registered. Caller's thread, while the workers run.
  virtual absl::Status RegisterFixed(int /*index*/, void* /*base*/, uint64_t /*bytes*/) {
    return absl::UnimplementedError("fixed buffers need the io_uring backend");
  }
  // Empties fixed buffer `index` of every worker.
  virtual void UnregisterFixed(int /*index*/) {}

 private:
  // One registered fixed buffer, keyed by its start address in fixed_.
  struct FixedBuffer {
    uintptr_t end = 0;
    int index = -1;
  };
  void Unregister(uint64_t id) override;
  // The fixed buffer holding [buffer, buffer + bytes) whole, or -1.
  int FixedIndex(const char* buffer, uint64_t bytes) const;
  // Logs why Register failed, once per engine.
  void WarnRegisterFailed(const absl::Status& why, uint64_t bytes);

  IoTicket Submit(bool write, const SwapFile& file, uint64_t offset, char* buffer, uint64_t bytes, IoPriority priority)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Whether `ticket` names a request not yet finished.
  bool RunningLocked(IoTicket ticket) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Finish(IoRequest* request, const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status TransferError(const IoPiece& piece, int err, const char* file, int line) const;

  const IoOptions options_;
  absl::Mutex mu_;
  absl::CondVar done_cv_;                                                         // a request's pieces_left reached 0
  std::map<IoTicket, std::unique_ptr<IoRequest>> requests_ ABSL_GUARDED_BY(mu_);  // not yet collected
  IoTicket next_ticket_ = 1;                                                      // caller's thread only
  int next_worker_ = 0;                                                           // caller's thread only
  std::atomic<uint64_t> bytes_read_{0};
  std::atomic<uint64_t> bytes_written_{0};
  std::atomic<uint64_t> requests_hurried_{0};
  std::atomic<uint64_t> pieces_fixed_{0};
  // Registered memory. Register, Unregister and Submit are called from one
  // thread at a time (IoEngine's contract) and the workers never look here
  // (a piece carries its index), so these need no lock.
  std::map<uintptr_t, FixedBuffer> fixed_;
  std::map<uint64_t, std::vector<uintptr_t>> registrations_;  // handle id -> starts in fixed_
  std::vector<int> free_fixed_;                               // unused entry indices
  uint64_t next_registration_ = 1;
  uint64_t bytes_registered_ = 0;
  bool register_warned_ = false;
};

// The backends. `options` are validated, block_size is rounded up and
// options.backend names the backend. The io_uring one exists only in builds
// with ZT_WITH_URING; it is Unavailable when the kernel refuses io_uring.
absl::StatusOr<std::unique_ptr<IoEngine>> CreateUringEngine(const IoOptions& options);
std::unique_ptr<IoEngine> CreateThreadsEngine(const IoOptions& options);

}  // namespace zt::offload::internal
