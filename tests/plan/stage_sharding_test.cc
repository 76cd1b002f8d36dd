// plan::StageSharding against DeepSpeed's definition of the stages (ZeRO
// paper, section 5; DeepSpeed's zero_optimization.stage): 1 partitions the
// optimizer states, 2 also the gradients, 3 also the parameters.
#include "plan/stage_sharding.h"

#include <gtest/gtest.h>

namespace zt::plan {
namespace {

TEST(StageSharding, EachStageShardsWhatDeepSpeedsDoes) {
  struct Row {
    int stage;
    bool optimizer_state, gradients, parameters;
  };
  const Row rows[] = {{0, false, false, false}, {1, true, false, false}, {2, true, true, false}, {3, true, true, true}};
  for (const Row& r : rows) {
    const StageSharding s(r.stage);
    SCOPED_TRACE(r.stage);
    EXPECT_EQ(s.stage(), r.stage);
    EXPECT_EQ(s.optimizer_state(), r.optimizer_state);
    EXPECT_EQ(s.gradients(), r.gradients);
    EXPECT_EQ(s.parameters(), r.parameters);
  }
}

TEST(StageSharding, EachStageShardsAtLeastWhatTheStageBelowDoes) {
  for (int stage = 1; stage <= 3; ++stage) {
    const StageSharding below(stage - 1), s(stage);
    EXPECT_TRUE(!below.optimizer_state() || s.optimizer_state());
    EXPECT_TRUE(!below.gradients() || s.gradients());
    EXPECT_TRUE(!below.parameters() || s.parameters());
  }
  EXPECT_EQ(StageSharding().stage(), 0);  // default: plain data parallel
}

}  // namespace
}  // namespace zt::plan
