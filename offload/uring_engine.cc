// The io_uring backend of IoEngine: one worker thread per aio thread, each
// owning a ring with room for queue_depth pieces (plus one wake-up poll).
// Needs Linux 5.6+ (IORING_OP_READ/WRITE); older kernels make Create fail and
// the engine falls back to the thread pool.
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "offload/io_engine_internal.h"
#include "offload/piece_queue.h"
#include "util/log.h"
#include "util/status.h"
#include "util/unique_fd.h"

namespace zt::offload::internal {
namespace {

// Why io_uring_queue_init may fail, in words a user can act on.
const char* InitHint(int err) {
  switch (err) {
    case EPERM:
    case EACCES:
      return " (io_uring is disabled: the kernel.io_uring_disabled sysctl, or a seccomp profile such as a container "
             "runtime's)";
    case ENOSYS: return " (this kernel has no io_uring)";
    case ENOMEM: return " (the locked-memory limit, ulimit -l, is too low for the ring)";
    default: return "";
  }
}

// The owner of one io_uring instance: its fd and the mapped rings.
class UringRing {
 public:
  // Unavailable when the kernel refuses io_uring or lacks the opcodes used.
  static absl::StatusOr<std::unique_ptr<UringRing>> Create(unsigned entries);
  ~UringRing() {
    if (initialized_) io_uring_queue_exit(&ring_);
  }
  UringRing(const UringRing&) = delete;
  UringRing& operator=(const UringRing&) = delete;
  io_uring* get() { return &ring_; }
  // OK when the ring has its table of kMaxFixedBuffers empty fixed-buffer
  // entries, else why not (Register then leaves every transfer unfixed).
  const absl::Status& fixed_table() const { return fixed_table_; }

  // Fills / empties fixed-buffer entry `index`. Any thread: the kernel
  // serializes registration against the worker's submissions (no quiescing
  // on kernels with sparse tables, 5.19+), and transfers already using an
  // entry keep its old pages until they complete.
  absl::Status SetFixed(int index, void* base, uint64_t bytes) {
    struct iovec iov = {base, static_cast<size_t>(bytes)};
    const int ret = io_uring_register_buffers_update_tag(&ring_, static_cast<unsigned>(index), &iov, nullptr, 1);
    if (ret >= 0) return absl::OkStatus();
    return SysError(-ret, __FILE__, __LINE__,
                    absl::StrCat("io_uring_register_buffers_update_tag for ", bytes, " bytes"));
  }

 private:
  UringRing() = default;
  io_uring ring_{};
  bool initialized_ = false;
  absl::Status fixed_table_;
};

struct ProbeFree {
  void operator()(io_uring_probe* p) const { io_uring_free_probe(p); }
};

absl::StatusOr<std::unique_ptr<UringRing>> UringRing::Create(unsigned entries) {
  std::unique_ptr<UringRing> ring(new UringRing());
  const int ret = io_uring_queue_init(entries, &ring->ring_, 0);
  if (ret < 0) {
    absl::Status status =
        SysError(-ret, __FILE__, __LINE__, absl::StrCat("io_uring_queue_init with ", entries, " entries"));
    return absl::UnavailableError(absl::StrCat(status.message(), InitHint(-ret)));
  }
  ring->initialized_ = true;
  std::unique_ptr<io_uring_probe, ProbeFree> probe(io_uring_get_probe_ring(&ring->ring_));
  if (probe == nullptr) {
    return absl::UnavailableError(
        "io_uring_get_probe_ring failed: the kernel cannot list its io_uring operations (older than Linux 5.6?)");
  }
  for (int op : {IORING_OP_READ, IORING_OP_WRITE, IORING_OP_POLL_ADD}) {
    if (!io_uring_opcode_supported(probe.get(), op)) {
      return absl::UnavailableError(
          absl::StrCat("this kernel's io_uring lacks operation ", op, " (READ, WRITE and POLL_ADD need Linux 5.6+)"));
    }
  }
  // An empty table now, filled entry by entry as swap pools register, so
  // pools created at different times need no common registration point.
  // Costs no locked memory until an entry is filled.
  const int sparse = io_uring_register_buffers_sparse(&ring->ring_, static_cast<unsigned>(kMaxFixedBuffers));
  if (sparse < 0) {
    ring->fixed_table_ =
        absl::UnavailableError(absl::StrCat("io_uring_register_buffers_sparse: ", std::strerror(-sparse),
                                            " (sparse fixed-buffer tables need Linux 5.19+)"));
  }
  return ring;
}

// One worker: a thread and its ring. Enqueue and Stop run on the caller's
// thread; everything else on the worker's own thread, which alone touches the
// ring, so the ring needs no lock.
class UringWorker {
 public:
  UringWorker(IoEngineBase* engine, std::unique_ptr<UringRing> ring, UniqueFd wake_fd, const IoOptions& options,
              int index)
      : engine_(engine),
        ring_(std::move(ring)),
        wake_fd_(std::move(wake_fd)),
        queue_depth_(options.queue_depth),
        single_submit_(options.single_submit),
        overlap_(options.overlap_events),
        index_(index),
        slots_(static_cast<size_t>(options.queue_depth)) {
    for (int s = queue_depth_ - 1; s >= 0; --s) free_slots_.push_back(s);
  }
  ~UringWorker() { Stop(); }

  void Start() {
    thread_ = std::thread([this] { overlap_ ? RunOverlapped() : RunBatches(); });
    const std::string name = absl::StrCat("zt-uring-", index_);  // at most 15 characters
    pthread_setname_np(thread_.native_handle(), name.c_str());
  }

  void Enqueue(std::vector<IoPiece> pieces, IoPriority priority) ABSL_LOCKS_EXCLUDED(mu_) {
    bool wake;
    {
      absl::MutexLock lock(&mu_);
      pending_.Push(std::move(pieces), priority);
      wake = waiting_in_kernel_;
    }
    cv_.Signal();
    if (wake) Wake();
  }

  UringRing& ring() { return *ring_; }

  // No wake-up: the order matters only when a slot frees, and the worker
  // looks at the queue then anyway.
  size_t Hurry(IoTicket ticket) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return pending_.Hurry(ticket);
  }

  // Finishes every queued and in-flight piece, then joins the thread.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_) {
    if (!thread_.joinable()) return;
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    cv_.Signal();
    thread_.join();
  }

 private:
  // user_data of the eventfd poll; pieces use their slot index.
  static constexpr uint64_t kWakeTag = ~uint64_t{0};
  // io_uring_submit answering EAGAIN/EBUSY (the kernel short of memory) is
  // retried this many times, 100 us apart, before the worker gives up.
  static constexpr int kMaxSubmitAttempts = 10000;

  void Wake() {
    const uint64_t one = 1;
    const ssize_t w = ::write(wake_fd_.get(), &one, sizeof(one));
    // EAGAIN: the counter is saturated, so a wake-up is pending anyway.
    ZT_CHECK_MSG(w == static_cast<ssize_t>(sizeof(one)) || errno == EAGAIN, "eventfd write: %s", std::strerror(errno));
  }

  // Overlapped: keep up to queue_depth pieces in flight, refilling as each
  // completes. While pieces are in flight the thread sleeps in the kernel,
  // so new work arriving then wakes it through the eventfd poll.
  void RunOverlapped() ABSL_LOCKS_EXCLUDED(mu_) {
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        waiting_in_kernel_ = false;
        if (inflight_ == 0) {
          while (!(stop_ || !pending_.empty())) cv_.Wait(&mu_);
          if (pending_.empty()) return;  // stopping, nothing left
        }
        TakeLocked();
        waiting_in_kernel_ = true;
      }
      StartTaken();
      if (!wake_armed_ && broken_.ok()) ArmWake();
      Flush();
      if (inflight_ > 0) Reap();
    }
  }

  // Batches: submit up to queue_depth pieces, wait for all of them (short
  // transfers resubmitted within the batch), then take the next batch.
  void RunBatches() ABSL_LOCKS_EXCLUDED(mu_) {
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        while (!(stop_ || !pending_.empty())) cv_.Wait(&mu_);
        if (pending_.empty()) return;
        TakeLocked();
      }
      StartTaken();
      Flush();
      while (inflight_ > 0) {
        Reap();
        Flush();
      }
    }
  }

  // Moves as many queued pieces as there are free slots into taken_;
  // StartTaken gives them slots outside the lock.
  void TakeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    size_t room = free_slots_.size();
    while (room-- > 0 && !pending_.empty()) taken_.push_back(pending_.Pop());
  }

  // Runs the test hook on each taken piece and puts it in a slot for Flush.
  void StartTaken() {
    for (IoPiece& piece : taken_) {
      if (!broken_.ok()) {
        engine_->FailPiece(piece, broken_);
        continue;
      }
      if (int err = engine_->InjectedErrno(piece); err != 0) {
        if (engine_->Apply(piece, -err, __FILE__, __LINE__)) continue;
      }
      const int slot = free_slots_.back();
      free_slots_.pop_back();
      slots_[static_cast<size_t>(slot)] = piece;
      ++inflight_;
      to_prep_.push_back(slot);
    }
    taken_.clear();
  }

  void ArmWake() {
    io_uring_sqe* sqe = io_uring_get_sqe(ring_->get());
    ZT_CHECK_MSG(sqe != nullptr, "io_uring worker %d: no free submission entry for the wake-up poll", index_);
    io_uring_prep_poll_add(sqe, wake_fd_.get(), POLLIN);
    io_uring_sqe_set_data64(sqe, kWakeTag);
    unsubmitted_.push_back(kWakeTag);
    wake_armed_ = true;
  }

  void Prep(int slot) {
    // Never null: the ring has queue_depth + 1 entries and at most one
    // submission entry per slot plus the poll is outstanding.
    io_uring_sqe* sqe = io_uring_get_sqe(ring_->get());
    ZT_CHECK_MSG(sqe != nullptr, "io_uring worker %d: no free submission entry", index_);
    IoPiece& p = slots_[static_cast<size_t>(slot)];
    const unsigned len = static_cast<unsigned>(p.left);  // <= kMaxBlockSize
    if (p.fixed >= 0) {
      // The registered pages: no pinning and releasing per transfer. The
      // remainder of a short transfer stays inside the same buffer.
      if (p.request->write) {
        io_uring_prep_write_fixed(sqe, p.request->fd, p.buffer, len, p.offset, p.fixed);
      } else {
        io_uring_prep_read_fixed(sqe, p.request->fd, p.buffer, len, p.offset, p.fixed);
      }
    } else if (p.request->write) {
      io_uring_prep_write(sqe, p.request->fd, p.buffer, len, p.offset);
    } else {
      io_uring_prep_read(sqe, p.request->fd, p.buffer, len, p.offset);
    }
    io_uring_sqe_set_data64(sqe, static_cast<uint64_t>(slot));
    unsubmitted_.push_back(static_cast<uint64_t>(slot));
  }

  // Prepares the slots waiting for it and submits: one system call per piece
  // with single_submit, else one for all of them.
  void Flush() {
    for (int slot : to_prep_) {
      if (!broken_.ok()) {
        ReleaseSlot(slot, broken_);
        continue;
      }
      Prep(slot);
      if (single_submit_) Submit();
    }
    to_prep_.clear();
    Submit();
  }

  void Submit() {
    int attempts = 0;
    while (!unsubmitted_.empty() && broken_.ok()) {
      const int ret = io_uring_submit(ring_->get());
      if (ret > 0) {
        // The kernel takes entries in order; the rest stay queued.
        for (int i = 0; i < ret && !unsubmitted_.empty(); ++i) unsubmitted_.pop_front();
        attempts = 0;
        continue;
      }
      if (ret == -EINTR) continue;
      if ((ret == 0 || ret == -EAGAIN || ret == -EBUSY) && ++attempts < kMaxSubmitAttempts) {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        continue;
      }
      // The ring refuses work. What it has not taken is failed here and never
      // submitted (nothing calls io_uring_submit again), so those buffers
      // are free; what it took completes normally.
      broken_ = SysError(ret < 0 ? -ret : EAGAIN, __FILE__, __LINE__,
                         absl::StrCat("io_uring_submit on I/O worker ", index_, " (the worker stops submitting)"));
      for (uint64_t ud : unsubmitted_) {
        if (ud == kWakeTag) {
          wake_armed_ = false;
        } else {
          ReleaseSlot(static_cast<int>(ud), broken_);
        }
      }
      unsubmitted_.clear();
    }
  }

  // Fails the piece in `slot` with `status` and frees the slot.
  void ReleaseSlot(int slot, const absl::Status& status) {
    engine_->FailPiece(slots_[static_cast<size_t>(slot)], status);
    free_slots_.push_back(slot);
    --inflight_;
  }

  // Waits for one completion, then handles every completion that is ready.
  void Reap() {
    io_uring_cqe* cqe = nullptr;
    int ret;
    do {
      ret = io_uring_wait_cqe(ring_->get(), &cqe);
    } while (ret == -EINTR);
    // Without completions there is no knowing when the kernel is done with
    // the buffers in flight, so nothing could be released safely.
    ZT_IO_CHECK_NONNEGATIVE(ret, absl::StrCat("io_uring_wait_cqe on I/O worker ", index_));
    unsigned head;
    unsigned seen = 0;
    io_uring_for_each_cqe(ring_->get(), head, cqe) {
      Complete(io_uring_cqe_get_data64(cqe), cqe->res);
      ++seen;
    }
    io_uring_cq_advance(ring_->get(), seen);
  }

  void Complete(uint64_t user_data, int res) {
    if (user_data == kWakeTag) {
      uint64_t count;
      const ssize_t r = ::read(wake_fd_.get(), &count, sizeof(count));  // resets the counter
      ZT_CHECK_MSG(r == static_cast<ssize_t>(sizeof(count)) || errno == EAGAIN, "eventfd read: %s",
                   std::strerror(errno));
      wake_armed_ = false;
      if (broken_.ok()) ArmWake();  // submitted with the next batch
      return;
    }
    const int slot = static_cast<int>(user_data);
    IoPiece& p = slots_[static_cast<size_t>(slot)];
    if (engine_->Apply(p, res, __FILE__, __LINE__)) {
      free_slots_.push_back(slot);
      --inflight_;
    } else {
      to_prep_.push_back(slot);  // the remainder of a short transfer, or a retry
    }
  }

  IoEngineBase* const engine_;
  const std::unique_ptr<UringRing> ring_;
  const UniqueFd wake_fd_;  // eventfd: Enqueue writes it while the thread waits in the kernel
  const int queue_depth_;
  const bool single_submit_;
  const bool overlap_;
  const int index_;

  absl::Mutex mu_;
  absl::CondVar cv_;
  PieceQueue pending_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool waiting_in_kernel_ ABSL_GUARDED_BY(mu_) = false;

  // The worker thread's own.
  std::vector<IoPiece> taken_;  // from pending_, not yet in a slot
  std::vector<IoPiece> slots_;  // user_data = slot index
  std::vector<int> free_slots_;
  int inflight_ = 0;                  // slots holding a piece
  std::vector<int> to_prep_;          // slots whose piece must be (re)submitted
  std::deque<uint64_t> unsubmitted_;  // user_data of entries the kernel has not taken yet, in order
  bool wake_armed_ = false;
  absl::Status broken_;  // set once submission failed for good
  std::thread thread_;
};

class UringEngine final : public IoEngineBase {
 public:
  explicit UringEngine(const IoOptions& options) : IoEngineBase(options) {}
  ~UringEngine() override {
    for (auto& w : workers_) w->Stop();
  }
  std::vector<std::unique_ptr<UringWorker>> workers_;

 protected:
  void Enqueue(int worker, std::vector<IoPiece> pieces, IoPriority priority) override {
    workers_[static_cast<size_t>(worker)]->Enqueue(std::move(pieces), priority);
  }
  size_t HurryQueued(int worker, IoTicket ticket) override {
    return workers_[static_cast<size_t>(worker)]->Hurry(ticket);
  }
  // Every ring gets the entry, since a request's pieces go to all workers.
  absl::Status RegisterFixed(int index, void* base, uint64_t bytes) override {
    for (size_t w = 0; w < workers_.size(); ++w) {
      absl::Status st = workers_[w]->ring().fixed_table();
      if (st.ok()) st = workers_[w]->ring().SetFixed(index, base, bytes);
      if (!st.ok()) {
        for (size_t done = 0; done < w; ++done) (void)workers_[done]->ring().SetFixed(index, nullptr, 0);
        return st;
      }
    }
    return absl::OkStatus();
  }
  void UnregisterFixed(int index) override {
    for (auto& w : workers_) {
      // Should emptying fail, the old pages stay pinned until the entry is
      // filled again or the ring closes: memory held, never data misplaced,
      // since the engine no longer maps any address to this entry.
      absl::Status st = w->ring().SetFixed(index, nullptr, 0);
      if (!st.ok()) {
        ZT_LOG(WARNING) << "emptying io_uring fixed buffer " << index << ": " << st.message();
      }
    }
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<IoEngine>> CreateUringEngine(const IoOptions& options) {
  auto engine = std::make_unique<UringEngine>(options);
  for (int i = 0; i < options.threads; ++i) {
    ZT_ASSIGN_OR_RETURN(std::unique_ptr<UringRing> ring,
                        UringRing::Create(static_cast<unsigned>(options.queue_depth) + 1));
    const int wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ZT_IO_RETURN_IF_ERRNO(wake_fd, "eventfd for an io_uring worker");
    engine->workers_.push_back(
        std::make_unique<UringWorker>(engine.get(), std::move(ring), UniqueFd(wake_fd), options, i));
  }
  for (auto& w : engine->workers_) w->Start();
  return std::unique_ptr<IoEngine>(std::move(engine));
}

}  // namespace zt::offload::internal
