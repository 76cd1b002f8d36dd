// StdMutex, StdMutexLock, StdCondVar: std::mutex and std::condition_variable
// with clang's thread-safety annotations (ABSL_GUARDED_BY(mu_) on the members
// they guard), for code that ThreadSanitizer must also see.
//
// Why not absl::Mutex, as util/, offload/ and engine/ use: Debian's Abseil is
// not built with TSan, so TSan cannot see absl::Mutex's lock and unlock and
// reports every access under it as a race. comm/'s locks guard what gloo's
// and LibTorch's threads hand back, and its tests run under TSan
// (scripts/sanitize.sh thread), so comm/ keeps the standard mutex (TSan
// intercepts its pthread calls) and gets the static analysis through this
// wrapper: scripts/thread_safety.sh checks both kinds alike.
//
// The API follows absl's (Lock/Unlock, a scoped lock taking a pointer,
// condition waits that take the mutex), so a wait reads as an explicit loop
// over guarded state the analysis can check:
//   StdMutexLock lock(&mu_);
//   while (!done_) cv_.Wait(&mu_);
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace zt {

class ABSL_LOCKABLE StdMutex {
 public:
  StdMutex() = default;
  StdMutex(const StdMutex&) = delete;
  StdMutex& operator=(const StdMutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  friend class StdCondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope.
class ABSL_SCOPED_LOCKABLE StdMutexLock {
 public:
  explicit StdMutexLock(StdMutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~StdMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  StdMutexLock(const StdMutexLock&) = delete;
  StdMutexLock& operator=(const StdMutexLock&) = delete;

 private:
  StdMutex* const mu_;
};

// A condition variable over StdMutex. Each wait is called with `mu` held,
// releases it while blocked and holds it again on return (wake-ups may be
// spurious: callers loop on their condition).
class StdCondVar {
 public:
  void Wait(StdMutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // still held: the caller's lock owns it
  }
  // Returns false when `deadline` passed (the steady clock, so a wall-clock
  // jump moves no timeout).
  bool WaitUntil(StdMutex* mu, std::chrono::steady_clock::time_point deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool woken = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace zt
