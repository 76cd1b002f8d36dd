// IoEngine: asynchronous reads and writes between aligned host buffers and
// O_DIRECT swap files (offload/swap_file.h), the transport under NVMe
// offload. Backends: io_uring (liburing) and, where the kernel refuses
// io_uring (seccomp, io_uring_disabled, an old kernel), a pool of threads
// doing pread/pwrite, chosen with a one-line warning.
//
// DeepSpeed's `aio` block maps onto IoOptions:
//   block_size      each request is cut into pieces of at most this many bytes;
//   queue_depth     pieces in flight per worker (its ring has one entry
//                   more, for the poll that wakes it when requests arrive);
//   thread_count    workers (each with its own ring), pieces striped across them;
//   single_submit   one piece per submit call instead of a batch;
//   overlap_events  refill the queue as pieces complete (false: submit a
//                   batch, wait for all of it, submit the next).
// The threads backend keeps queue_depth pieces in flight per worker with that
// many pread/pwrite threads (at most kMaxThreadsPerWorker); single_submit has
// no meaning there (every pread is its own system call).
//
//   auto io = zt::ValueOrThrow(offload::IoEngine::Create({}));
//   offload::IoTicket t = io->Write(file, /*offset=*/0, buffer.data(), buffer.size());
//   ...                                   // compute while the write runs
//   ZT_RETURN_IF_ERROR(io->Wait(t));      // the buffer may be reused now
//
// Contract:
//  * Buffers, offsets and lengths are multiples of kIoAlignment (O_DIRECT);
//    anything else is InvalidArgument from Wait, and nothing is submitted.
//  * A buffer must stay valid, and must not be written (for writes) or read
//    (for reads), until Wait on its ticket returns; the SwapFile must stay
//    open until then too.
//  * A request must lie inside the file's reserved size (SwapFile::size()):
//    beyond it is OutOfRange, nothing submitted (reads: past the end; writes:
//    growing the file would defeat the reservation that keeps a full disk from
//    failing mid-training).
//  * Short transfers are resubmitted for the remainder; reading past the end
//    of a file is an error (OutOfRange) naming the file and offset.
//  * Any failure (EIO, ENOSPC, EFBIG, ...) comes back from Wait as a Status
//    naming the operation, the file, the offset and the errno text; the other
//    pieces of that request still finish before Wait returns, so the buffer
//    is free afterwards. Never a silent short write. EIO is DataLoss,
//    ENOSPC/EDQUOT/EFBIG ResourceExhausted, the rest as absl maps errno.
//  * Priority: urgent requests start before background ones (each class in
//    submission order); a request someone waits on, or hurries, starts before
//    both. Pieces already handed to the kernel are not reordered, so an urgent
//    read waits for at most queue_depth pieces in flight per worker. A
//    background request never starves for good: the one it is waited on, it
//    goes first.
//  * Fixed buffers: memory passed to Register is pinned by io_uring once;
//    transfers lying inside it skip the per-transfer pinning of their pages
//    (same bytes moved, less kernel time). Unregistering (the handle's
//    destructor) must wait until no transfer uses the memory any more.
//  * Read/Write/Wait/WaitAll/Hurry/Register are called from one thread at a
//    time (the training thread); the workers are internal.
//  * Destroying the engine waits for the transfers still in flight (the
//    kernel may be writing into their buffers), then stops the workers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "util/direct_io.h"

namespace zt::offload {

class SwapFile;

// O_DIRECT alignment for buffer addresses, file offsets and lengths: the
// one the checkpoint tools' direct I/O uses (util/direct_io.h).
inline constexpr uint64_t kIoAlignment = kDirectAlignment;
using zt::AlignUp;

// Limits checked by IoEngine::Create (InvalidArgument naming the aio key).
inline constexpr int64_t kMaxBlockSize = int64_t{1} << 30;  // aio.block_size
inline constexpr int kMaxQueueDepth = 1024;                 // aio.queue_depth
inline constexpr int kMaxIoThreads = 64;                    // aio.intra_op_parallelism
// Threads backend: pread/pwrite threads per worker (queue_depth beyond this
// adds no parallelism there).
inline constexpr int kMaxThreadsPerWorker = 64;

enum class IoBackend { kAuto, kUring, kThreads };
const char* IoBackendName(IoBackend b);  // "io_uring", "threads", "auto"

struct IoOptions {
  int64_t block_size = 1048576;  // aio.block_size (rounded up to kIoAlignment)
  int queue_depth = 8;           // aio.queue_depth
  int threads = 1;               // aio.thread_count / intra_op_parallelism
  bool single_submit = false;    // aio.single_submit
  bool overlap_events = true;    // aio.overlap_events
  // false: IoPriority and Hurry are ignored, every piece starts in
  // submission order (for same-run comparisons).
  bool priorities = true;
  // false: Register does nothing and every transfer pins its pages itself
  // (for same-run comparisons).
  bool fixed_buffers = true;
  // kAuto: io_uring when the kernel allows it, else threads (with a warning).
  // ZT_AIO_BACKEND=uring|threads in the environment overrides kAuto.
  IoBackend backend = IoBackend::kAuto;
  // Tests only: called before each piece is submitted (once per piece, not
  // again for the remainder of a short transfer), with the piece's file
  // offset; a nonzero errno return makes that piece fail with it (fault
  // injection). Runs on the engine's worker threads, several at a time.
  std::function<int(bool write, uint64_t offset)> inject_error;
};

// Identifies one submitted request; 0 is never a valid ticket.
using IoTicket = uint64_t;

// Which queued transfers start first. Urgent: what the training is about to
// wait for (a parameter shard the next layer gathers). Background: what only
// has to be done by some later point (optimizer state read ahead of its
// sub-group's update, write-backs).
enum class IoPriority { kBackground, kUrgent };

// io_uring takes at most 1 GiB per fixed buffer; Register cuts larger regions.
inline constexpr uint64_t kMaxFixedBufferBytes = uint64_t{1} << 30;
// Fixed-buffer table entries per ring (what Register can hand out).
inline constexpr int kMaxFixedBuffers = 1024;

class IoEngine;
namespace internal {
class IoEngineBase;
}

// Memory registered with IoEngine::Register; unregisters it when destroyed.
// Move-only. Destroy it before the engine, and only after every transfer
// into or out of the memory has been waited for.
class IoRegistration {
 public:
  IoRegistration() = default;
  ~IoRegistration() { Reset(); }
  IoRegistration(IoRegistration&& other) noexcept { *this = std::move(other); }
  IoRegistration& operator=(IoRegistration&& other) noexcept;
  IoRegistration(const IoRegistration&) = delete;
  IoRegistration& operator=(const IoRegistration&) = delete;

  // Whether transfers inside the memory use fixed buffers (false: the kernel
  // or the options refused, and they pin their pages per transfer).
  bool fixed() const { return engine_ != nullptr; }
  void Reset();

 private:
  friend class internal::IoEngineBase;
  IoRegistration(IoEngine* engine, uint64_t id) : engine_(engine), id_(id) {}
  IoEngine* engine_ = nullptr;
  uint64_t id_ = 0;
};

class IoEngine {
 public:
  // InvalidArgument for options out of range (names the aio key);
  // Unavailable when backend is kUring explicitly and io_uring cannot start.
  static absl::StatusOr<std::unique_ptr<IoEngine>> Create(const IoOptions& options);
  virtual ~IoEngine() = default;

  // Starts a transfer of `bytes` between `buffer` and `file` at `offset`.
  virtual IoTicket Read(const SwapFile& file, uint64_t offset, void* buffer, uint64_t bytes, IoPriority priority) = 0;
  virtual IoTicket Write(const SwapFile& file, uint64_t offset, const void* buffer, uint64_t bytes,
                         IoPriority priority) = 0;
  IoTicket Read(const SwapFile& file, uint64_t offset, void* buffer, uint64_t bytes) {
    return Read(file, offset, buffer, bytes, IoPriority::kBackground);
  }
  IoTicket Write(const SwapFile& file, uint64_t offset, const void* buffer, uint64_t bytes) {
    return Write(file, offset, buffer, bytes, IoPriority::kBackground);
  }
  // Blocks until the request finished; its status (OK or the first error).
  // Hurries the request first if it has not finished. Each ticket is waited
  // on at most once; a ticket already collected (by Wait or WaitAll) returns
  // OK, 0 or a ticket never issued InvalidArgument.
  virtual absl::Status Wait(IoTicket ticket) = 0;
  // Never blocks: moves the pieces of `ticket` not yet started ahead of every
  // other queued piece (the caller will wait for it next). No effect on a
  // request finished, collected or never issued.
  virtual void Hurry(IoTicket ticket) = 0;
  // Waits for every outstanding request and collects them all; the error of
  // the lowest failed ticket, if any.
  virtual absl::Status WaitAll() = 0;
  // Never blocks: true when Wait(ticket) would return at once (the request
  // finished, was collected already, or was never issued).
  virtual bool Ready(IoTicket ticket) = 0;

  virtual IoBackend backend() const = 0;  // never kAuto: the one chosen
  // The options in effect: block_size rounded up, backend resolved.
  virtual const IoOptions& options() const = 0;
  // Bytes moved since creation (for benchmarks and logs).
  virtual uint64_t bytes_read() const = 0;
  virtual uint64_t bytes_written() const = 0;
  // Requests whose queued pieces a Hurry (or a Wait) moved forward: how
  // often a background transfer was needed before its turn.
  virtual uint64_t requests_hurried() const = 0;

  // Registers [base, base + bytes) (kIoAlignment-aligned) as io_uring fixed
  // buffers: the kernel pins its pages once, here, instead of pinning and
  // releasing them on every transfer, which was ~40% of NVMe offload's
  // kernel time. Transfers whose piece lies inside one registered buffer use
  // it from then on; the results are the same either way. Never fails the
  // caller: where the memory cannot be registered (the threads backend,
  // fixed_buffers false, a kernel older than 5.19, the locked-memory limit
  // without CAP_IPC_LOCK, more than kMaxFixedBuffers buffers) the handle is
  // empty and the first refusal by the kernel is logged once per engine with
  // what to change.
  virtual IoRegistration Register(void* base, uint64_t bytes) = 0;
  // Bytes registered now, and pieces moved through fixed buffers so far.
  virtual uint64_t bytes_registered() const = 0;
  virtual uint64_t pieces_fixed() const = 0;

  // Synchronous conveniences: submit and wait.
  absl::Status ReadSync(const SwapFile& file, uint64_t offset, void* buffer, uint64_t bytes) {
    return Wait(Read(file, offset, buffer, bytes));
  }
  absl::Status WriteSync(const SwapFile& file, uint64_t offset, const void* buffer, uint64_t bytes) {
    return Wait(Write(file, offset, buffer, bytes));
  }

 private:
  friend class IoRegistration;
  // Undoes the Register call that returned handle `id`.
  virtual void Unregister(uint64_t id) = 0;
};

}  // namespace zt::offload
