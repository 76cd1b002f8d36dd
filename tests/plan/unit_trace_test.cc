// UnitTrace: recording, following, departures and reuse distances.
#include "plan/unit_trace.h"

#include <gtest/gtest.h>

#include <vector>

namespace zt::plan {
namespace {

using Obs = UnitTrace::Observation;

int64_t Ten(int) { return 10; }

TEST(UnitTraceTest, FirstMicroStepRecordsThenFollows) {
  UnitTrace t;
  const std::vector<int> order = {1, 2, 3, 3, 2, 1};
  for (int u : order) EXPECT_EQ(t.Observe(u), Obs::kNoTrace);
  EXPECT_FALSE(t.following());
  t.EndMicroStep();
  EXPECT_TRUE(t.following());
  EXPECT_EQ(t.order(), order);
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(t.position(), i);
    EXPECT_EQ(t.Observe(order[i]), Obs::kMatch);
  }
  EXPECT_EQ(t.mismatches(), 0);
}

TEST(UnitTraceTest, DepartureStopsFollowingAndIsRecordedForNextTime) {
  UnitTrace t;
  for (int u : {1, 2, 3}) t.Observe(u);
  t.EndMicroStep();
  EXPECT_EQ(t.Observe(1), Obs::kMatch);
  EXPECT_EQ(t.Observe(3), Obs::kMismatch);
  EXPECT_EQ(t.last_expected(), 2);
  EXPECT_FALSE(t.following());
  EXPECT_EQ(t.Observe(2), Obs::kNoTrace);  // reported once per micro-step
  EXPECT_EQ(t.mismatches(), 1);
  t.EndMicroStep();
  EXPECT_EQ(t.order(), (std::vector<int>{1, 3, 2}));
  for (int u : {1, 3, 2}) EXPECT_EQ(t.Observe(u), Obs::kMatch);
}

TEST(UnitTraceTest, RequestBeyondTheEndIsADeparture) {
  UnitTrace t;
  t.Observe(4);
  t.EndMicroStep();
  EXPECT_EQ(t.Observe(4), Obs::kMatch);
  EXPECT_EQ(t.Observe(4), Obs::kMismatch);
  EXPECT_EQ(t.last_expected(), -1);
}

TEST(UnitTraceTest, EmptyMicroStepKeepsTheTrace) {
  UnitTrace t;
  for (int u : {5, 6}) t.Observe(u);
  t.EndMicroStep();
  t.EndMicroStep();
  EXPECT_TRUE(t.following());
  EXPECT_EQ(t.order(), (std::vector<int>{5, 6}));
}

TEST(UnitTraceTest, ReuseDistanceCountsElementsGatheredInBetween) {
  UnitTrace t;
  for (int u : {0, 1, 2, 3, 3, 2, 1, 0}) t.Observe(u);
  t.EndMicroStep();
  EXPECT_EQ(t.ReuseDistance(3, Ten), 30);  // from the start: units 0, 1, 2 first
  for (int u : {0, 1, 2, 3}) t.Observe(u);
  // After unit 3's forward request, unit 3 comes next: distance 0.
  EXPECT_EQ(t.ReuseDistance(3, Ten), 0);
  EXPECT_EQ(t.ReuseDistance(2, Ten), 10);
  EXPECT_EQ(t.ReuseDistance(0, Ten), 30);
  t.Observe(3);
  t.Observe(2);
  t.Observe(1);
  t.Observe(0);
  EXPECT_FALSE(t.ReuseDistance(3, Ten).has_value());
}

}  // namespace
}  // namespace zt::plan
