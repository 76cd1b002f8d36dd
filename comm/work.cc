// Implementation of comm/work.h.
#include "comm/work.h"

#include "absl/strings/str_cat.h"
#include "comm/rendezvous.h"
#include "util/std_mutex.h"
#include "util/strings.h"

namespace zt::comm {

std::string DTypeName(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::Float: return "fp32";
    case c10::ScalarType::Double: return "fp64";
    case c10::ScalarType::Half: return "fp16";
    case c10::ScalarType::BFloat16: return "bf16";
    case c10::ScalarType::Int: return "int32";
    case c10::ScalarType::Long: return "int64";
    case c10::ScalarType::Short: return "int16";
    case c10::ScalarType::Char: return "int8";
    case c10::ScalarType::Byte: return "uint8";
    case c10::ScalarType::Bool: return "bool";
    default: return c10::toString(dtype);
  }
}

std::string CollectiveInfo::Describe() const {
  std::string out = kind == CollectiveKind::kBarrier
                        ? absl::StrCat(ToString(kind), " #", seq)
                        : absl::StrCat(ToString(kind), " #", seq, " (", HumanBytes(static_cast<double>(bytes)), " ",
                                       DTypeName(dtype), ")");
  if (!label.empty()) absl::StrAppend(&out, " for ", label);
  return out;
}

bool WorkState::Complete(absl::Status status) {
  StdMutexLock lock(&mu_);
  if (done_) return false;
  done_ = true;
  status_ = std::move(status);
  cv_.NotifyAll();
  return true;
}

bool WorkState::IsCompleted() {
  StdMutexLock lock(&mu_);
  return done_;
}

bool WorkState::WaitUntil(std::chrono::steady_clock::time_point deadline) {
  StdMutexLock lock(&mu_);
  // On the steady clock; done_ decides the result, not the timeout.
  while (!done_) {
    if (!cv_.WaitUntil(&mu_, deadline)) break;
  }
  return done_;
}

absl::Status WorkState::status() {
  StdMutexLock lock(&mu_);
  return status_;
}

AsyncWork::AsyncWork(std::shared_ptr<WorkState> state, std::chrono::milliseconds default_timeout,
                     WaitTimeoutHandler on_timeout, std::shared_ptr<WaitClock> waited)
    : state_(std::move(state)),
      default_timeout_(default_timeout),
      on_timeout_(std::move(on_timeout)),
      waited_(std::move(waited)) {}

absl::Status AsyncWork::Wait(std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  const bool was_done = state_->IsCompleted();
  const bool done = state_->WaitUntil(start + timeout);
  if (waited_ && !was_done) {
    waited_->fetch_add(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count(),
        std::memory_order_relaxed);
  }
  if (!done) {
    if (on_timeout_) on_timeout_(state_, timeout);
    // The handler completes the work; if it could not (no handler), do it
    // here so the result is stable.
    state_->Complete(absl::DeadlineExceededError(
        absl::StrCat(state_->info().Describe(), " did not complete within ", FormatDuration(timeout))));
  }
  return state_->status();
}

std::unique_ptr<Work> CompletedWork(CollectiveInfo info, absl::Status status) {
  auto state = std::make_shared<WorkState>(std::move(info));
  state->Complete(std::move(status));
  return std::make_unique<AsyncWork>(std::move(state), std::chrono::milliseconds(0), nullptr);
}

}  // namespace zt::comm
