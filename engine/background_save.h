// An asynchronous checkpoint (`checkpoint.async_save`): the save's tensors
// are copied into host staging memory, then a background thread writes the
// same files a synchronous save writes, while training goes on. Internal to
// zt_engine.
//
// The copy itself is mostly off the training thread too: parameters, master
// weights and optimizer state change only when the optimizer updates them,
// so the writer thread copies them first, while the next forward and
// backward run, and the engine waits for that copy (WaitUntilStaged) before
// anything can change them (Step; a boundary Backward where the update
// schedule starts the update during backward; a GatheredParameters
// modifier). What a forward changes (module
// buffers) and what is read through a source (state on NVMe, whose swap
// buffers training keeps using) is copied before Start returns.
//
// Contract
//  - Start() places `prepared` in `arena` (ckpt/save_snapshot.h) and starts
//    the writer thread; a failed snapshot is not an error here but the
//    save's outcome (done() at once, Join() returns it), so every rank still
//    reaches the same Commit and agrees on the failure.
//  - The writer thread copies the deferred tensors (at normal priority: the
//    next update waits for them), then only writes this rank's files
//    (Checkpointer::WriteFiles): no collective, no engine state. It writes
//    under SCHED_IDLE, on CPU time training leaves: at nice +10 the write
//    still cost 1.6x per step while both cores of this machine computed
//    (an OpenMP region waits for its slowest thread), under SCHED_IDLE
//    1.13x, with the write taking ~2.5x longer (zt_bench_async_save).
//  - The owner commits (a collective, Checkpointer::Commit) once every rank's
//    writer is done; until then `latest` names the previous checkpoint, so a
//    crash during the write leaves that one loadable.
//  - Join() waits for the writer and returns its outcome; the destructor joins.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "ckpt/save_snapshot.h"
#include "engine/checkpointer.h"

namespace zt {

class BackgroundSave {
 public:
  static std::unique_ptr<BackgroundSave> Start(Checkpointer::PreparedSave prepared, ckpt::SnapshotArena& arena);
  ~BackgroundSave();
  BackgroundSave(const BackgroundSave&) = delete;
  BackgroundSave& operator=(const BackgroundSave&) = delete;

  // The writer has finished (either way); Join() will not block.
  bool done() const { return done_.load(std::memory_order_acquire); }
  // Blocks until every tensor has been copied into the arena, so the live
  // ones may change; the seconds it waited.
  double WaitUntilStaged();
  absl::Status Join();

  const Checkpointer::PreparedSave& prepared() const { return prepared_; }
  double snapshot_seconds() const { return snapshot_seconds_; }
  double write_seconds() const { return write_seconds_; }  // valid after Join()

 private:
  explicit BackgroundSave(Checkpointer::PreparedSave prepared) : prepared_(std::move(prepared)) {}

  Checkpointer::PreparedSave prepared_;
  std::thread writer_;
  std::atomic<bool> done_{false};
  absl::Notification staged_;  // the deferred copies are done
  // The writer's thread id once it runs under SCHED_IDLE, and whether Join
  // wants it at normal priority.
  absl::Mutex priority_mu_;
  pid_t writer_tid_ ABSL_GUARDED_BY(priority_mu_) = 0;
  bool urgent_ ABSL_GUARDED_BY(priority_mu_) = false;
  absl::Status outcome_;  // written by the writer before done_, read after
  double snapshot_seconds_ = 0;
  double write_seconds_ = 0;
};

}  // namespace zt
