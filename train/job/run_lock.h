// One `zt train` run per output directory. Two runs writing the same
// checkpoints, CSV, TensorBoard files and report would each exit 0 with the
// other's files mixed into theirs; the second must refuse instead.
//
// The lock is an flock(2) on <output_dir>/.zt_run.lock, held for the life of
// the process that took it: the kernel releases it on any exit, kill -9
// included, so a lock left by a dead run never blocks the next one (no stale
// lock to clean up). The file also records the holder's pid and start time,
// for the message the second run prints. Linux only.
//
//   ZT_ASSIGN_OR_RETURN(RunLock lock, RunLock::Acquire(output_dir));
//   ... train; the lock goes with `lock` (or the process).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "util/unique_fd.h"

namespace zt::train {

class RunLock {
 public:
  // Creates `output_dir` if needed and takes its lock without waiting.
  // FailedPrecondition naming the directory and the holder's pid when another
  // live process holds it; PermissionDenied when the directory is not writable.
  static absl::StatusOr<RunLock> Acquire(const std::string& output_dir);

  RunLock(RunLock&&) = default;
  RunLock& operator=(RunLock&&) = default;

  const std::string& path() const { return path_; }

 private:
  RunLock(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  UniqueFd fd_;
  std::string path_;
};

// Name of the environment variable a `zt train` that holds the lock sets for
// the ranks it starts, so they do not try to take it again.
inline constexpr char kRunLockHeldEnv[] = "ZT_TRAIN_RUN_LOCK_HELD";

}  // namespace zt::train
