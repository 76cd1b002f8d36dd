// Implementation of engine/background_save.h.
#include "engine/background_save.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <exception>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "util/clock.h"

namespace zt {
namespace {

void SetWriterPolicy(pid_t tid, int policy) {
  sched_param p{};
  p.sched_priority = 0;
  ::sched_setscheduler(tid, policy, &p);
}

}  // namespace

std::unique_ptr<BackgroundSave> BackgroundSave::Start(Checkpointer::PreparedSave prepared, ckpt::SnapshotArena& arena) {
  std::unique_ptr<BackgroundSave> save(new BackgroundSave(std::move(prepared)));
  Checkpointer::PreparedSave& p = save->prepared_;
  const auto t0 = SteadyClock::now();
  absl::Status staged = p.replicas_agree;
  // Buffers change in forward: copied now, with what sources produce.
  const std::set<std::string> buffers(p.buffer_names.begin(), p.buffer_names.end());
  if (staged.ok() && p.writes) {
    staged = arena.Snapshot(&p.shards, p.write_model_states ? &p.module : nullptr, /*defer=*/true, buffers);
  }
  save->snapshot_seconds_ = Seconds(t0, SteadyClock::now());
  if (!staged.ok() || !p.writes) {
    p.keep.clear();
    save->outcome_ = staged;
    save->staged_.Notify();
    save->done_.store(true, std::memory_order_release);
    return save;
  }
  BackgroundSave* self = save.get();
  ckpt::SnapshotArena* to = &arena;
  try {
    self->writer_ = std::thread([self, to] {
      // The copy at normal priority: the next optimizer update waits for it.
      to->CopyDeferred();
      self->prepared_.keep.clear();  // the copies are taken: the live tensors may change
      self->staged_.Notify();
      {
        // SCHED_IDLE (Linux, per thread, inherited by the threads the writer
        // starts): the write runs on CPU time training leaves idle, unless
        // training already waits for it (Join).
        absl::MutexLock lock(&self->priority_mu_);
        self->writer_tid_ = static_cast<pid_t>(::syscall(SYS_gettid));
        if (!self->urgent_) SetWriterPolicy(self->writer_tid_, SCHED_IDLE);
      }
      const auto w0 = SteadyClock::now();
      try {
        self->outcome_ = Checkpointer::WriteFiles(self->prepared_);
      } catch (const std::exception& e) {  // an exception must not end the process from this thread
        self->outcome_ = absl::InternalError(absl::StrCat("writing ", self->prepared_.folder, ": ", e.what()));
      }
      self->write_seconds_ = Seconds(w0, SteadyClock::now());
      self->done_.store(true, std::memory_order_release);
    });
  } catch (const std::system_error& e) {
    // No thread: the save fails here, on this rank, and every rank still
    // reaches the same commit (which agrees on the failure).
    to->CopyDeferred();
    p.keep.clear();
    save->outcome_ = absl::ResourceExhaustedError(
        absl::StrCat("starting the background writer of checkpoint '", p.folder, "': ", e.what()));
    save->staged_.Notify();
    save->done_.store(true, std::memory_order_release);
  }
  return save;
}

BackgroundSave::~BackgroundSave() {
  if (writer_.joinable()) writer_.join();
}

double BackgroundSave::WaitUntilStaged() {
  if (staged_.HasBeenNotified()) return 0.0;
  const auto t0 = SteadyClock::now();
  staged_.WaitForNotification();
  return Seconds(t0, SteadyClock::now());
}

absl::Status BackgroundSave::Join() {
  {
    // Training now waits for the write: it runs at normal priority from here.
    absl::MutexLock lock(&priority_mu_);
    urgent_ = true;
    if (writer_tid_ != 0 && !done()) SetWriterPolicy(writer_tid_, SCHED_OTHER);
  }
  if (writer_.joinable()) writer_.join();
  return outcome_;
}

}  // namespace zt
