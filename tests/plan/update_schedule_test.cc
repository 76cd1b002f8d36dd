// plan/update_schedule.h: which optimizer update schedule each run gets.
#include "plan/update_schedule.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace zt::plan {
namespace {

// The rule as the engine applied it before the schedule was one enum: three
// flags set in sequence (the update during backward first, then the update
// at gather, which turns the first into the split update's first half).
// Kept here as the reference every combination must agree with.
UpdateSchedule AsFlags(const UpdateScheduleFacts& f) {
  const bool may_in_backward = f.allow_during_backward && f.sharding.stage() == 3 && !f.gradient_clipping && !f.fp16;
  bool early = may_in_backward && f.state_walks_ahead && !f.params_swapped;
  bool deferred = false;
  bool split = false;
  if (f.allow_at_gather && f.sharding.stage() == 3 && !early && f.params_swapped && f.master_is_params) {
    deferred = f.first_deferrable_group < f.group_count;
    split = deferred && may_in_backward && f.params_swapped && f.master_is_params && f.state_walks_ahead &&
            f.optimizer_splits && f.fp32_grads;
    early = split;
  }
  if (split) return UpdateSchedule::kSplit;
  if (early) return UpdateSchedule::kDuringBackward;
  if (deferred) return UpdateSchedule::kAtGather;
  return UpdateSchedule::kInStep;
}

// Stage 3, state on NVMe, nothing in the way.
UpdateScheduleFacts Nvme() {
  UpdateScheduleFacts f;
  f.sharding = StageSharding(3);
  f.state_walks_ahead = true;
  f.group_count = 6;
  f.first_deferrable_group = 6;
  return f;
}

TEST(ChooseUpdateSchedule, AgreesWithTheFlagsItReplacedOnEveryCombination) {
  int seen[4] = {0, 0, 0, 0};
  for (int bits = 0; bits < (1 << 11); ++bits) {
    for (int stage = 0; stage <= 3; ++stage) {
      UpdateScheduleFacts f;
      f.sharding = StageSharding(stage);
      f.gradient_clipping = bits & 1;
      f.fp16 = bits & 2;
      f.state_walks_ahead = bits & 4;
      f.params_swapped = bits & 8;
      f.master_is_params = bits & 16;
      f.optimizer_splits = bits & 32;
      f.fp32_grads = bits & 64;
      f.allow_during_backward = bits & 128;
      f.allow_at_gather = bits & 256;
      f.group_count = 5;
      f.first_deferrable_group = (bits & 512) ? 2 : ((bits & 1024) ? 0 : 5);
      const UpdateSchedule s = ChooseUpdateSchedule(f);
      ASSERT_EQ(s, AsFlags(f)) << "bits " << bits << " stage " << stage;
      ++seen[static_cast<int>(s)];
      if (stage != 3) {
        EXPECT_EQ(s, UpdateSchedule::kInStep);
      }
    }
  }
  for (int k = 0; k < 4; ++k) EXPECT_GT(seen[k], 0) << UpdateScheduleName(static_cast<UpdateSchedule>(k));
}

TEST(ChooseUpdateSchedule, EachScheduleWhereItBelongs) {
  UpdateScheduleFacts f = Nvme();
  EXPECT_EQ(ChooseUpdateSchedule(f), UpdateSchedule::kDuringBackward);
  // Each thing that needs every gradient first keeps it in the step.
  f.gradient_clipping = true;
  EXPECT_EQ(ChooseUpdateSchedule(f), UpdateSchedule::kInStep);
  f = Nvme();
  f.fp16 = true;
  EXPECT_EQ(ChooseUpdateSchedule(f), UpdateSchedule::kInStep);
  f = Nvme();
  f.allow_during_backward = false;
  EXPECT_EQ(ChooseUpdateSchedule(f), UpdateSchedule::kInStep);
  // Parameters on NVMe too: the update waits for the gathers, or is split.
  f = Nvme();
  f.params_swapped = true;
  EXPECT_EQ(ChooseUpdateSchedule(f), UpdateSchedule::kInStep);  // no group may wait
  f.first_deferrable_group = 2;
  EXPECT_EQ(ChooseUpdateSchedule(f), UpdateSchedule::kInStep);  // bf16: the master is a copy
  f.master_is_params = true;
  EXPECT_EQ(ChooseUpdateSchedule(f), UpdateSchedule::kAtGather);
  f.optimizer_splits = true;
  EXPECT_EQ(ChooseUpdateSchedule(f), UpdateSchedule::kAtGather);  // bf16 gradients
  f.fp32_grads = true;
  EXPECT_EQ(ChooseUpdateSchedule(f), UpdateSchedule::kSplit);
  f.gradient_clipping = true;
  EXPECT_EQ(ChooseUpdateSchedule(f), UpdateSchedule::kAtGather);
  f.allow_at_gather = false;
  EXPECT_EQ(ChooseUpdateSchedule(f), UpdateSchedule::kInStep);
  // The optimizer state in memory: only the update at gather is left.
  f = Nvme();
  f.state_walks_ahead = false;
  EXPECT_EQ(ChooseUpdateSchedule(f), UpdateSchedule::kInStep);
  f.params_swapped = f.master_is_params = f.optimizer_splits = f.fp32_grads = true;
  f.first_deferrable_group = 0;
  EXPECT_EQ(ChooseUpdateSchedule(f), UpdateSchedule::kAtGather);
}

TEST(UpdateSchedule, PhasesAndWords) {
  EXPECT_TRUE(UpdatesDuringBackward(UpdateSchedule::kDuringBackward));
  EXPECT_TRUE(UpdatesDuringBackward(UpdateSchedule::kSplit));
  EXPECT_FALSE(UpdatesDuringBackward(UpdateSchedule::kAtGather));
  EXPECT_TRUE(UpdatesAtGather(UpdateSchedule::kAtGather));
  EXPECT_TRUE(UpdatesAtGather(UpdateSchedule::kSplit));
  EXPECT_FALSE(UpdatesAtGather(UpdateSchedule::kInStep));
  EXPECT_EQ(DescribeUpdateSchedule(UpdateSchedule::kInStep), "");
  EXPECT_TRUE(absl::StrContains(DescribeUpdateSchedule(UpdateSchedule::kSplit), "split"));
  UpdateScheduleFacts f = Nvme();
  f.sharding = StageSharding(2);
  EXPECT_TRUE(absl::StrContains(InStepReason(f), "stage 3"));
  f.sharding = StageSharding(3);
  f.gradient_clipping = true;
  EXPECT_TRUE(absl::StrContains(InStepReason(f), "gradient_clipping"));
  f.gradient_clipping = false;
  f.fp16 = true;
  EXPECT_TRUE(absl::StrContains(InStepReason(f), "fp16"));
  f.fp16 = false;
  EXPECT_TRUE(absl::StrContains(InStepReason(f), "parameter shards on NVMe"));
}

}  // namespace
}  // namespace zt::plan
