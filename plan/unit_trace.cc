// Implementation of plan/unit_trace.h.
#include "plan/unit_trace.h"

namespace zt::plan {

UnitTrace::Observation UnitTrace::Observe(int unit) {
  recording_.push_back(unit);
  if (!following_) return Observation::kNoTrace;
  if (pos_ < trace_.size() && trace_[pos_] == unit) {
    ++pos_;
    return Observation::kMatch;
  }
  last_expected_ = pos_ < trace_.size() ? trace_[pos_] : -1;
  following_ = false;
  ++mismatches_;
  return Observation::kMismatch;
}

std::optional<int64_t> UnitTrace::ReuseDistance(int unit, const std::function<int64_t(int)>& numel) const {
  if (!following_) return std::nullopt;
  int64_t distance = 0;
  for (size_t i = pos_; i < trace_.size(); ++i) {
    if (trace_[i] == unit) return distance;
    distance += numel(trace_[i]);
  }
  return std::nullopt;
}

void UnitTrace::EndMicroStep() {
  // A micro-step that requested nothing (a backward that touched no unit)
  // says nothing about the order: keep the old trace.
  if (!recording_.empty()) trace_.swap(recording_);
  recording_.clear();
  pos_ = 0;
  following_ = !trace_.empty();
}

}  // namespace zt::plan
