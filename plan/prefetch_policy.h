// The stage-3 prefetch and reuse rules, as pure decisions over sizes: which
// unit may be gathered ahead, and whether a unit's parameters stay gathered
// after its forward. zero/param_coordinator.cc acts on them while training;
// estimate/memory_estimate.cc replays them to predict the gathered peak. A
// change to a rule is made here once.
#pragma once

#include <cstdint>
#include <optional>

namespace zt::plan {

// Element budgets (DeepSpeed's stage3_prefetch_bucket_size,
// stage3_max_live_parameters, stage3_max_reuse_distance).
struct PrefetchLimits {
  int64_t prefetch_bucket_numel = 50000000;  // elements gathered ahead of use at once
  int64_t max_live_numel = 1000000000;       // elements gathered at once, in all
  int64_t max_reuse_distance = 1000000000;   // keep when needed again within this many elements
};

// A unit of `numel` sharded elements may be gathered ahead when it fits both
// the prefetch window (`window`: elements gathered ahead and not yet used)
// and the live budget (`live`: elements gathered now). Prefetching walks the
// recorded order and stops at the first unit that does not fit.
inline bool FitsPrefetch(int64_t window, int64_t live, int64_t numel, const PrefetchLimits& limits) {
  return window + numel <= limits.prefetch_bucket_numel && live + numel <= limits.max_live_numel;
}

// After its forward, a unit stays gathered when the recorded order asks for
// it again within max_reuse_distance elements (`reuse_distance`; nullopt: not
// again in this micro-step, or no order to follow) and the live budget holds.
inline bool KeepAfterForward(std::optional<int64_t> reuse_distance, int64_t live, const PrefetchLimits& limits) {
  return reuse_distance.has_value() && *reuse_distance < limits.max_reuse_distance && live <= limits.max_live_numel;
}

}  // namespace zt::plan
