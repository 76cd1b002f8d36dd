// The Work handle shared by every backend: a one-shot completion (first
// status wins) plus a description of the collective for error messages.
// Thread-safe: workers complete it, any thread may wait on it.
#pragma once

#include <c10/core/ScalarType.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "comm/process_group.h"
#include "util/std_mutex.h"

namespace zt::comm {

// What a collective is, for messages: "all_gather #17 (4.0 MiB bf16)".
struct CollectiveInfo {
  CollectiveKind kind = CollectiveKind::kBarrier;
  uint32_t seq = 0;   // the group's sequence number (also the transport tag)
  int64_t bytes = 0;  // size of the full buffer the collective works on
  c10::ScalarType dtype = c10::ScalarType::Byte;
  std::string label;  // what it is for (comm/collective_label.h); "" when not given
  // "all_gather #151 (4 MiB fp32) for parameters of unit h.3"
  std::string Describe() const;
};

// "fp32", "bf16", "fp16", "int64", ...
std::string DTypeName(c10::ScalarType dtype);

// Completion state of one collective. Complete() is first-wins: the worker
// that ran the collective and a group that aborts race to complete it, and
// later calls are ignored.
class WorkState {
 public:
  explicit WorkState(CollectiveInfo info) : info_(std::move(info)) {}

  // Returns true when this call completed the work.
  bool Complete(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);
  bool IsCompleted() ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until completed or `deadline`; returns whether it completed.
  bool WaitUntil(std::chrono::steady_clock::time_point deadline) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status status() ABSL_LOCKS_EXCLUDED(mu_);  // only meaningful once completed
  const CollectiveInfo& info() const { return info_; }

 private:
  const CollectiveInfo info_;
  StdMutex mu_;
  StdCondVar cv_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

// Called when Wait() runs out of time on a work that is still running. It
// must complete `state` (typically by failing the group, which completes
// every pending work), and may take a bounded time to diagnose.
using WaitTimeoutHandler =
    std::function<void(const std::shared_ptr<WorkState>& state, std::chrono::milliseconds waited)>;

// Nanoseconds callers spent blocked in Wait, summed over a group's works.
using WaitClock = std::atomic<int64_t>;

// The Work implementation every backend returns.
class AsyncWork : public Work {
 public:
  // `waited` (may be null) accumulates the time Wait blocks.
  AsyncWork(std::shared_ptr<WorkState> state, std::chrono::milliseconds default_timeout, WaitTimeoutHandler on_timeout,
            std::shared_ptr<WaitClock> waited = nullptr);

  // Blocks until completion or `timeout`. On timeout the handler turns the
  // work into a DeadlineExceeded error (the group aborts), so a later Wait
  // returns that same error, and buffers are never written after it.
  absl::Status Wait(std::chrono::milliseconds timeout) override;
  absl::Status Wait() override { return Wait(default_timeout_); }
  bool IsCompleted() override { return state_->IsCompleted(); }

  const std::shared_ptr<WorkState>& state() const { return state_; }

 private:
  std::shared_ptr<WorkState> state_;
  std::chrono::milliseconds default_timeout_;
  WaitTimeoutHandler on_timeout_;
  std::shared_ptr<WaitClock> waited_;
};

// A Work that is already complete (single rank, argument errors, failed group).
std::unique_ptr<Work> CompletedWork(CollectiveInfo info, absl::Status status);

}  // namespace zt::comm
