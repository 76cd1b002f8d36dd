// IoEngine::Create (option checks, backend choice and the fallback warning)
// and IoEngineBase, the part both backends share: tickets, cutting requests
// into block_size pieces striped across workers, and applying results.
#include "offload/io_engine.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>  // std::call_once
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "offload/io_engine_internal.h"
#include "offload/swap_file.h"
#include "util/log.h"
#include "util/status.h"
#include "util/strings.h"

namespace zt::offload {

const char* IoBackendName(IoBackend b) {
  switch (b) {
    case IoBackend::kAuto: return "auto";
    case IoBackend::kUring: return "io_uring";
    case IoBackend::kThreads: return "threads";
  }
  return "?";
}

namespace internal {
namespace {

// What a user can do about an errno, appended to transfer errors.
const char* Advice(int err) {
  switch (err) {
    case ENOSPC:
    case EDQUOT: return "; the swap file's space was reserved, so the filesystem lost it: free space there";
    case EFBIG: return "; a file size limit was hit (ulimit -f, or the filesystem's maximum file size)";
    case EIO: return "; the device reported an I/O error (check the kernel log)";
    case EINVAL: return "; the filesystem refused this O_DIRECT transfer (alignment or O_DIRECT support)";
    default: return "";
  }
}

}  // namespace

const char* SourceBaseName(const char* file) {
  const char* slash = std::strrchr(file, '/');
  return slash ? slash + 1 : file;
}

absl::Status SysError(int err, const char* file, int line, const std::string& what) {
  return absl::Status(absl::ErrnoToStatusCode(err),
                      absl::StrCat(what, ": ", std::strerror(err), " [", SourceBaseName(file), ":", line, "]"));
}

IoTicket IoEngineBase::Read(const SwapFile& file, uint64_t offset, void* buffer, uint64_t bytes, IoPriority priority) {
  return Submit(/*write=*/false, file, offset, static_cast<char*>(buffer), bytes, priority);
}

IoTicket IoEngineBase::Write(const SwapFile& file, uint64_t offset, const void* buffer, uint64_t bytes,
                             IoPriority priority) {
  // The buffer is only read from; the piece type is shared with reads.
  return Submit(/*write=*/true, file, offset, static_cast<char*>(const_cast<void*>(buffer)), bytes, priority);
}

IoTicket IoEngineBase::Submit(bool write, const SwapFile& file, uint64_t offset, char* buffer, uint64_t bytes,
                              IoPriority priority) {
  auto request = std::make_unique<IoRequest>();
  IoRequest* r = request.get();
  r->ticket = next_ticket_++;
  r->write = write;
  r->fd = file.fd();
  r->path = file.path();
  r->offset = offset;
  r->bytes = bytes;
  const char* op = write ? "write" : "read";

  // Everything checkable is checked here, so a bad request never reaches the
  // kernel and its status is ready for Wait.
  const uintptr_t address = reinterpret_cast<uintptr_t>(buffer);
  if (r->fd < 0) {
    r->status = absl::FailedPreconditionError(
        absl::StrCat(op, " of swap file '", file.path(), "': the file is not open (moved from?)"));
  } else if (bytes > 0 && buffer == nullptr) {
    r->status = absl::InvalidArgumentError(
        absl::StrCat(op, " of ", bytes, " bytes at offset ", offset, " of swap file '", file.path(), "': null buffer"));
  } else if (address % kIoAlignment != 0 || offset % kIoAlignment != 0 || bytes % kIoAlignment != 0) {
    r->status = absl::InvalidArgumentError(absl::StrFormat(
        "%s of swap file '%s': O_DIRECT needs the buffer address, offset and length to be multiples of %d, got "
        "buffer %p, offset %d, length %d; allocate with AlignedBuffer and round sizes with AlignUp",
        op, file.path(), kIoAlignment, static_cast<void*>(buffer), offset, bytes));
  } else if (offset > file.size() || bytes > file.size() - offset) {
    r->status = absl::OutOfRangeError(
        absl::StrCat(op, " of ", bytes, " bytes at offset ", offset, " of swap file '", file.path(),
                     "' ends past its reserved size ", file.size(),
                     write ? " (writes may not grow a swap file: it was reserved up front)" : ""));
  }

  const uint64_t block = static_cast<uint64_t>(options_.block_size);
  const uint64_t pieces = r->status.ok() ? (bytes + block - 1) / block : 0;
  r->pieces_left = static_cast<int64_t>(pieces);
  {
    absl::MutexLock lock(&mu_);
    requests_.emplace(r->ticket, std::move(request));
  }
  if (pieces == 0) return r->ticket;

  // Striped round-robin, starting where the previous request stopped, so
  // single-piece requests spread over the workers too.
  const int workers = options_.threads;
  std::vector<std::vector<IoPiece>> per_worker(static_cast<size_t>(workers));
  for (uint64_t i = 0; i < pieces; ++i) {
    IoPiece piece;
    piece.request = r;
    piece.offset = offset + i * block;
    piece.buffer = buffer + i * block;
    piece.left = std::min(block, bytes - i * block);
    piece.fixed = FixedIndex(piece.buffer, piece.left);
    if (piece.fixed >= 0) pieces_fixed_.fetch_add(1, std::memory_order_relaxed);
    per_worker[static_cast<size_t>((next_worker_ + i) % workers)].push_back(piece);
  }
  next_worker_ = static_cast<int>((next_worker_ + pieces) % workers);
  const IoTicket ticket = r->ticket;
  for (int w = 0; w < workers; ++w) {
    if (!per_worker[static_cast<size_t>(w)].empty()) {
      Enqueue(w, std::move(per_worker[static_cast<size_t>(w)]),
              options_.priorities ? priority : IoPriority::kBackground);
    }
  }
  return ticket;
}

IoRegistration IoEngineBase::Register(void* base, uint64_t bytes) {
  if (!options_.fixed_buffers || base == nullptr || bytes == 0) return {};
  const uintptr_t start = reinterpret_cast<uintptr_t>(base);
  if (start % kIoAlignment != 0) return {};  // no transfer could lie in it anyway
  const uint64_t id = next_registration_++;
  std::vector<uintptr_t>& starts = registrations_[id];
  // Cut at kMaxFixedBufferBytes; a transfer straddling a cut pins its pages
  // itself (FixedIndex finds no buffer holding it whole).
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t len = std::min(kMaxFixedBufferBytes, bytes - done);
    absl::Status st = free_fixed_.empty() ? absl::OutOfRangeError(absl::StrCat(
                                                "all ", kMaxFixedBuffers, " fixed-buffer entries of the ring are used"))
                                          : RegisterFixed(free_fixed_.back(), static_cast<char*>(base) + done, len);
    if (!st.ok()) {
      Unregister(id);
      if (!absl::IsUnimplemented(st)) WarnRegisterFailed(st, bytes);
      return {};
    }
    const int index = free_fixed_.back();
    free_fixed_.pop_back();
    fixed_[start + done] = FixedBuffer{start + done + len, index};
    starts.push_back(start + done);
    bytes_registered_ += len;
    done += len;
  }
  return IoRegistration(this, id);
}

void IoEngineBase::Unregister(uint64_t id) {
  auto it = registrations_.find(id);
  if (it == registrations_.end()) return;
  for (uintptr_t start : it->second) {
    auto f = fixed_.find(start);
    UnregisterFixed(f->second.index);
    free_fixed_.push_back(f->second.index);
    bytes_registered_ -= f->second.end - start;
    fixed_.erase(f);
  }
  registrations_.erase(it);
}

int IoEngineBase::FixedIndex(const char* buffer, uint64_t bytes) const {
  if (fixed_.empty()) return -1;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(buffer);
  auto it = fixed_.upper_bound(begin);  // the first buffer starting after `begin`
  if (it == fixed_.begin()) return -1;
  --it;
  return begin + bytes <= it->second.end ? it->second.index : -1;
}

void IoEngineBase::WarnRegisterFailed(const absl::Status& why, uint64_t bytes) {
  if (register_warned_) return;
  register_warned_ = true;
  std::string advice;
  // ENOMEM from the kernel (SysError maps it to ResourceExhausted): the
  // locked-memory limit. A full entry table is OutOfRange, with no advice.
  if (absl::IsResourceExhausted(why)) {
    struct rlimit rl {};
    const bool known = ::getrlimit(RLIMIT_MEMLOCK, &rl) == 0;
    advice = absl::StrCat(
        "; the locked-memory limit (ulimit -l",
        known && rl.rlim_cur != RLIM_INFINITY ? absl::StrCat(", now ", rl.rlim_cur >> 10, " KiB") : std::string(),
        ") is below the swap buffers times aio.intra_op_parallelism: raise it (memlock in limits.conf, "
        "LimitMEMLOCK= for a systemd unit, --ulimit memlock for a container) or grant CAP_IPC_LOCK");
  }
  ZT_LOG(WARNING) << "io_uring could not register " << HumanBytes(static_cast<double>(bytes))
                  << " of swap buffers as fixed buffers (" << why.message() << ")" << advice
                  << ". Transfers pin their pages one by one instead: the same results, more kernel time per step";
}

bool IoEngineBase::RunningLocked(IoTicket ticket) {
  auto it = requests_.find(ticket);
  return it != requests_.end() && it->second->pieces_left > 0;
}

void IoEngineBase::Hurry(IoTicket ticket) {
  if (!options_.priorities) return;
  {
    absl::MutexLock lock(&mu_);
    if (!RunningLocked(ticket)) return;
  }
  // Outside mu_, so that mu_ is never held while a worker's queue lock is
  // taken. Only this thread collects requests, so the request outlives this
  // call; if it finishes meanwhile, no piece of it is left queued to move.
  size_t moved = 0;
  for (int w = 0; w < options_.threads; ++w) moved += HurryQueued(w, ticket);
  if (moved > 0) requests_hurried_.fetch_add(1, std::memory_order_relaxed);
}

absl::Status IoEngineBase::Wait(IoTicket ticket) {
  Hurry(ticket);
  absl::MutexLock lock(&mu_);
  auto it = requests_.find(ticket);
  if (it == requests_.end()) {
    if (ticket == 0 || ticket >= next_ticket_) {
      return absl::InvalidArgumentError(absl::StrCat("IoEngine::Wait: ticket ", ticket, " was never issued"));
    }
    return absl::OkStatus();  // collected earlier; its status was returned then
  }
  IoRequest* r = it->second.get();
  while (r->pieces_left != 0) done_cv_.Wait(&mu_);
  absl::Status status = std::move(r->status);
  requests_.erase(it);
  return status;
}

bool IoEngineBase::Ready(IoTicket ticket) {
  absl::MutexLock lock(&mu_);
  auto it = requests_.find(ticket);
  return it == requests_.end() || it->second->pieces_left == 0;
}

absl::Status IoEngineBase::WaitAll() {
  absl::Status first;
  absl::MutexLock lock(&mu_);
  while (!requests_.empty()) {
    auto it = requests_.begin();
    IoRequest* r = it->second.get();
    while (r->pieces_left != 0) done_cv_.Wait(&mu_);
    if (first.ok() && !r->status.ok()) first = std::move(r->status);
    requests_.erase(it);
  }
  return first;
}

int IoEngineBase::InjectedErrno(const IoPiece& piece) const {
  if (!options_.inject_error) return 0;
  return options_.inject_error(piece.request->write, piece.offset);
}

void IoEngineBase::Finish(IoRequest* request, const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (!status.ok() && request->status.ok()) request->status = status;
  // Notified under the lock: once pieces_left is 0 the waiter may free the
  // request, so nothing here may touch it afterwards.
  if (--request->pieces_left == 0) done_cv_.SignalAll();
}

void IoEngineBase::FailPiece(IoPiece& piece, const absl::Status& status) {
  Finish(piece.request, status);
  piece.request = nullptr;
}

absl::Status IoEngineBase::TransferError(const IoPiece& piece, int err, const char* file, int line) const {
  const IoRequest& r = *piece.request;
  const bool uring = options_.backend == IoBackend::kUring;
  const char* op = uring ? (r.write ? "io_uring write" : "io_uring read") : (r.write ? "pwrite" : "pread");
  // absl files EIO under UNKNOWN (a transfer the device failed is data lost)
  // and EFBIG under OUT_OF_RANGE (kept for reading past the end here; a file
  // size limit is a quota, like a full disk).
  absl::StatusCode code = absl::ErrnoToStatusCode(err);
  if (err == EIO) code = absl::StatusCode::kDataLoss;
  if (err == EFBIG) code = absl::StatusCode::kResourceExhausted;
  return absl::Status(
      code, absl::StrCat(op, " of ", piece.left, " bytes at offset ", piece.offset, " of swap file '", r.path,
                         "' failed: ", std::strerror(err), Advice(err), " [", SourceBaseName(file), ":", line,
                         "] (part of a ", r.bytes, "-byte ", r.write ? "write" : "read", " at offset ", r.offset, ")"));
}

// Retrying EINTR/EAGAIN forever would spin on a device that keeps refusing.
constexpr int kMaxRetries = 1000;

bool IoEngineBase::Apply(IoPiece& piece, int64_t result, const char* file, int line) {
  IoRequest& r = *piece.request;
  if ((result == -EINTR || result == -EAGAIN) && ++piece.retries < kMaxRetries) return false;
  if (result < 0) {
    FailPiece(piece, TransferError(piece, static_cast<int>(-result), file, line));
    return true;
  }
  if (result == 0) {
    // A read of 0 bytes is the end of the file; a write of 0 bytes would
    // repeat forever, so it is an error too.
    absl::Status status =
        r.write ? absl::DataLossError(absl::StrCat("write at offset ", piece.offset, " of swap file '", r.path,
                                                   "': the kernel accepted 0 of ", piece.left, " bytes [",
                                                   SourceBaseName(file), ":", line, "]"))
                : absl::OutOfRangeError(absl::StrCat("read at offset ", piece.offset, " of swap file '", r.path,
                                                     "': end of file with ", piece.left, " bytes of the ", r.bytes,
                                                     "-byte read at offset ", r.offset, " still to read [",
                                                     SourceBaseName(file), ":", line, "]"));
    FailPiece(piece, status);
    return true;
  }
  ZT_CHECK_MSG(static_cast<uint64_t>(result) <= piece.left, "transfer of %lld bytes for a piece of %llu",
               static_cast<long long>(result), static_cast<unsigned long long>(piece.left));
  const uint64_t n = static_cast<uint64_t>(result);
  (r.write ? bytes_written_ : bytes_read_).fetch_add(n, std::memory_order_relaxed);
  piece.offset += n;
  piece.buffer += n;
  piece.left -= n;
  piece.retries = 0;
  if (piece.left > 0) return false;  // short transfer: the remainder goes again
  Finish(piece.request, absl::OkStatus());
  piece.request = nullptr;
  return true;
}

}  // namespace internal

IoRegistration& IoRegistration::operator=(IoRegistration&& other) noexcept {
  if (this != &other) {
    Reset();
    engine_ = std::exchange(other.engine_, nullptr);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

void IoRegistration::Reset() {
  if (engine_ != nullptr) engine_->Unregister(id_);
  engine_ = nullptr;
  id_ = 0;
}

namespace {

absl::Status CheckOptions(const IoOptions& o) {
  if (o.block_size < 1 || o.block_size > kMaxBlockSize) {
    return absl::InvalidArgumentError(absl::StrCat("aio.block_size is ", o.block_size, "; it must be between 1 and ",
                                                   kMaxBlockSize, " bytes (it is rounded up to ", kIoAlignment,
                                                   "; 1048576 is the default)"));
  }
  if (o.queue_depth < 1 || o.queue_depth > kMaxQueueDepth) {
    return absl::InvalidArgumentError(absl::StrCat("aio.queue_depth is ", o.queue_depth, "; it must be between 1 and ",
                                                   kMaxQueueDepth, " (8 is the default)"));
  }
  if (o.threads < 1 || o.threads > kMaxIoThreads) {
    return absl::InvalidArgumentError(absl::StrCat("aio.intra_op_parallelism (thread_count) is ", o.threads,
                                                   "; it must be between 1 and ", kMaxIoThreads,
                                                   " (1 is the default)"));
  }
  return absl::OkStatus();
}

// kAuto resolved by ZT_AIO_BACKEND, if set.
absl::StatusOr<IoBackend> RequestedBackend(IoBackend backend) {
  if (backend != IoBackend::kAuto) return backend;
  const char* env = std::getenv("ZT_AIO_BACKEND");
  if (env == nullptr) return IoBackend::kAuto;
  const std::string v(env);
  if (v.empty() || v == "auto") return IoBackend::kAuto;
  if (v == "uring" || v == "io_uring") return IoBackend::kUring;
  if (v == "threads") return IoBackend::kThreads;
  return absl::InvalidArgumentError(absl::StrCat("ZT_AIO_BACKEND='", v, "': use uring, threads or auto"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<IoEngine>> IoEngine::Create(const IoOptions& options) {
  ZT_RETURN_IF_ERROR(CheckOptions(options));
  ZT_ASSIGN_OR_RETURN(IoBackend requested, RequestedBackend(options.backend));
  IoOptions effective = options;
  effective.block_size = static_cast<int64_t>(AlignUp(static_cast<uint64_t>(options.block_size)));
  if (requested == IoBackend::kThreads) {
    effective.backend = IoBackend::kThreads;
    return internal::CreateThreadsEngine(effective);
  }
  effective.backend = IoBackend::kUring;
#ifdef ZT_OFFLOAD_HAVE_URING
  auto uring = internal::CreateUringEngine(effective);
  if (uring.ok()) return uring;
  absl::Status why = uring.status();
#else
  absl::Status why = absl::UnavailableError("this build has no io_uring support (configured with ZT_WITH_URING=OFF)");
#endif
  if (requested == IoBackend::kUring) {
    return absl::UnavailableError(absl::StrCat(
        "io_uring was asked for (", options.backend == IoBackend::kUring ? "IoOptions::backend" : "ZT_AIO_BACKEND",
        ") but cannot start: ", why.message()));
  }
  // Once per process: every swapper makes an engine and one line says it all.
  static std::once_flag warned;
  std::call_once(warned, [&] {
    ZT_LOG(WARNING) << "io_uring unavailable (" << why.message()
                    << "); NVMe offload uses the pread/pwrite thread pool instead, which is slower "
                       "(ZT_AIO_BACKEND=threads chooses it without this warning)";
  });
  effective.backend = IoBackend::kThreads;
  return internal::CreateThreadsEngine(effective);
}

}  // namespace zt::offload
