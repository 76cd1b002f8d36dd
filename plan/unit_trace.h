// UnitTrace: the order in which stage-3 units asked for their parameters
// during one micro-step (forward, then backward), recorded in one micro-step
// and replayed in the next so all-gathers can be issued ahead of use.
//
// Pure bookkeeping (no tensors, no communication), so it is unit-tested on
// its own. The coordinator that owns it makes every prefetch decision from
// this state alone, never from timing, so ranks that observe the same unit
// order issue the same collectives.
//
// Contract: Observe() is called once per request, EndMicroStep() after each
// backward. When a request departs from the trace, following() turns false
// until the micro-step ends; what was observed then becomes the next trace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace zt::plan {

class UnitTrace {
 public:
  enum class Observation {
    kMatch,     // the unit the trace expected at this position
    kMismatch,  // the first departure from the trace in this micro-step
    kNoTrace,   // no trace to follow (first micro-step, or after a departure)
  };
  // Records that `unit` asks for its parameters now.
  Observation Observe(int unit);
  // The unit the trace expected at the position of the last mismatch (-1: the
  // trace had ended), for the log line.
  int last_expected() const { return last_expected_; }

  // True while this micro-step has matched the trace so far.
  bool following() const { return following_; }
  // Units the trace expects after the current position, in order (empty when
  // not following).
  const std::vector<int>& order() const { return trace_; }
  size_t position() const { return pos_; }

  // Elements that will be gathered before `unit` is requested again, as the
  // sum of numel(u) over the requests in between; nullopt when the trace does
  // not request it again in this micro-step (or is not being followed).
  std::optional<int64_t> ReuseDistance(int unit, const std::function<int64_t(int)>& numel) const;

  // Ends the micro-step: what was observed becomes the trace to follow.
  void EndMicroStep();

  int64_t mismatches() const { return mismatches_; }

 private:
  std::vector<int> trace_;
  std::vector<int> recording_;
  size_t pos_ = 0;
  bool following_ = false;
  int last_expected_ = -1;
  int64_t mismatches_ = 0;
};

}  // namespace zt::plan
