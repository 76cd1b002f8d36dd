// The thread-pool backend of IoEngine, for kernels that refuse io_uring: each
// of `threads` workers runs min(queue_depth, kMaxThreadsPerWorker) threads
// doing blocking pread/pwrite, so that many pieces are in flight per worker.
// single_submit has no meaning here; overlap_events works as with io_uring.
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "offload/io_engine_internal.h"
#include "offload/piece_queue.h"

namespace zt::offload::internal {
namespace {

// One worker: a queue and the threads draining it. Enqueue and Stop run on
// the caller's thread.
class ThreadsWorker {
 public:
  ThreadsWorker(IoEngineBase* engine, const IoOptions& options)
      : engine_(engine),
        io_threads_(std::min(options.queue_depth, kMaxThreadsPerWorker)),
        overlap_(options.overlap_events) {}
  ~ThreadsWorker() { Stop(); }

  void Start(int index) {
    for (int t = 0; t < io_threads_; ++t) {
      threads_.emplace_back([this] { Run(); });
      const std::string name = absl::StrCat("zt-pio-", index, "-", t).substr(0, 15);
      pthread_setname_np(threads_.back().native_handle(), name.c_str());
    }
  }

  void Enqueue(std::vector<IoPiece> pieces, IoPriority priority) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      pending_.Push(std::move(pieces), priority);
    }
    cv_.SignalAll();
  }

  size_t Hurry(IoTicket ticket) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return pending_.Hurry(ticket);
  }

  // Finishes every queued piece, then joins the threads.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    cv_.SignalAll();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_) {
    for (;;) {
      IoPiece piece;
      {
        absl::MutexLock lock(&mu_);
        while (!(ClaimableLocked() || (stop_ && pending_.empty()))) cv_.Wait(&mu_);
        if (pending_.empty()) return;  // stopping, nothing left
        piece = pending_.Pop();
        if (!overlap_) --open_slots_;
      }
      Transfer(piece);
      if (!overlap_) {
        absl::MutexLock lock(&mu_);
        if (--batch_outstanding_ == 0) cv_.SignalAll();  // the next batch may start
      }
    }
  }

  // Whether a thread may take the next piece now. Without overlap_events a
  // batch of up to io_threads_ pieces starts only when the previous batch
  // has finished entirely, like a submit-and-wait-all.
  bool ClaimableLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (pending_.empty()) return false;
    if (overlap_ || open_slots_ > 0) return true;
    if (batch_outstanding_ > 0) return false;
    open_slots_ = batch_outstanding_ = static_cast<int>(std::min<size_t>(io_threads_, pending_.size()));
    return true;
  }

  // Moves one piece, resubmitting the remainder of short transfers.
  void Transfer(IoPiece& piece) {
    if (int err = engine_->InjectedErrno(piece); err != 0) {
      if (engine_->Apply(piece, -err, __FILE__, __LINE__)) return;
    }
    // Copied: once Apply finishes the piece, its request may be freed.
    const int fd = piece.request->fd;
    const bool write = piece.request->write;
    for (;;) {
      const ssize_t n = write ? ::pwrite(fd, piece.buffer, piece.left, static_cast<off_t>(piece.offset))
                              : ::pread(fd, piece.buffer, piece.left, static_cast<off_t>(piece.offset));
      const int64_t result = n < 0 ? -static_cast<int64_t>(errno) : static_cast<int64_t>(n);
      if (engine_->Apply(piece, result, __FILE__, __LINE__)) return;
    }
  }

  IoEngineBase* const engine_;
  const int io_threads_;
  const bool overlap_;

  absl::Mutex mu_;
  absl::CondVar cv_;
  PieceQueue pending_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int open_slots_ ABSL_GUARDED_BY(mu_) = 0;         // pieces the current batch may still start
  int batch_outstanding_ ABSL_GUARDED_BY(mu_) = 0;  // pieces of the current batch not finished
  std::vector<std::thread> threads_;
};

class ThreadsEngine final : public IoEngineBase {
 public:
  explicit ThreadsEngine(const IoOptions& options) : IoEngineBase(options) {
    for (int i = 0; i < options.threads; ++i) workers_.push_back(std::make_unique<ThreadsWorker>(this, options));
    for (int i = 0; i < options.threads; ++i) workers_[static_cast<size_t>(i)]->Start(i);
  }
  ~ThreadsEngine() override {
    for (auto& w : workers_) w->Stop();
  }

 protected:
  void Enqueue(int worker, std::vector<IoPiece> pieces, IoPriority priority) override {
    workers_[static_cast<size_t>(worker)]->Enqueue(std::move(pieces), priority);
  }
  size_t HurryQueued(int worker, IoTicket ticket) override {
    return workers_[static_cast<size_t>(worker)]->Hurry(ticket);
  }

 private:
  std::vector<std::unique_ptr<ThreadsWorker>> workers_;
};

}  // namespace

std::unique_ptr<IoEngine> CreateThreadsEngine(const IoOptions& options) {
  return std::make_unique<ThreadsEngine>(options);
}

}  // namespace zt::offload::internal
