// plan/prefetch_policy.h: the two stage-3 decisions at their boundaries.
#include "plan/prefetch_policy.h"

#include <gtest/gtest.h>

namespace zt::plan {
namespace {

PrefetchLimits Limits(int64_t bucket, int64_t live, int64_t reuse) {
  PrefetchLimits l;
  l.prefetch_bucket_numel = bucket;
  l.max_live_numel = live;
  l.max_reuse_distance = reuse;
  return l;
}

TEST(FitsPrefetch, BothBudgetsAreInclusive) {
  const PrefetchLimits l = Limits(100, 1000, 0);
  EXPECT_TRUE(FitsPrefetch(0, 0, 100, l));
  EXPECT_FALSE(FitsPrefetch(0, 0, 101, l));  // the window
  EXPECT_TRUE(FitsPrefetch(60, 0, 40, l));
  EXPECT_FALSE(FitsPrefetch(61, 0, 40, l));
  EXPECT_TRUE(FitsPrefetch(0, 950, 50, l));
  EXPECT_FALSE(FitsPrefetch(0, 951, 50, l));                // the live budget
  EXPECT_FALSE(FitsPrefetch(0, 0, 1, Limits(0, 1000, 0)));  // prefetch off
}

TEST(KeepAfterForward, NeededSoonAndWithinTheLiveBudget) {
  const PrefetchLimits l = Limits(0, 1000, 500);
  EXPECT_FALSE(KeepAfterForward(std::nullopt, 0, l));  // not needed again (or no trace)
  EXPECT_TRUE(KeepAfterForward(0, 0, l));
  EXPECT_TRUE(KeepAfterForward(499, 1000, l));
  EXPECT_FALSE(KeepAfterForward(500, 0, l));  // strictly within the distance
  EXPECT_FALSE(KeepAfterForward(10, 1001, l));
  EXPECT_FALSE(KeepAfterForward(0, 0, Limits(0, 1000, 0)));  // reuse off
}

// The defaults are DeepSpeed's stage3_* defaults.
TEST(PrefetchLimits, DeepSpeedDefaults) {
  const PrefetchLimits l;
  EXPECT_EQ(l.prefetch_bucket_numel, 50000000);
  EXPECT_EQ(l.max_live_numel, 1000000000);
  EXPECT_EQ(l.max_reuse_distance, 1000000000);
}

}  // namespace
}  // namespace zt::plan
