// Dynamic loss scaling, step by step against DeepSpeed's update rules.
#include "engine/loss_scaler.h"

#include <gtest/gtest.h>

namespace zt {
namespace {

Fp16Config Dynamic(int power, int window, int hysteresis, double min_scale, bool consecutive = false) {
  Fp16Config c;
  c.enabled = true;
  c.loss_scale = 0;
  c.initial_scale_power = power;
  c.loss_scale_window = window;
  c.hysteresis = hysteresis;
  c.min_loss_scale = min_scale;
  c.consecutive_hysteresis = consecutive;
  return c;
}

TEST(LossScaler, DisabledIsOne) {
  LossScaler s = LossScaler::Disabled();
  EXPECT_FALSE(s.enabled());
  EXPECT_EQ(s.scale(), 1.0);
  EXPECT_TRUE(s.Update(true).ok());
  EXPECT_EQ(s.scale(), 1.0);
}

TEST(LossScaler, StaticNeverChanges) {
  Fp16Config c;
  c.enabled = true;
  c.loss_scale = 128;
  LossScaler s(c);
  EXPECT_FALSE(s.dynamic());
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(s.Update(i % 2 == 0).ok());
  EXPECT_EQ(s.scale(), 128.0);
}

TEST(LossScaler, DoublesAfterWindowCleanSteps) {
  LossScaler s(Dynamic(4, 3, 1, 1));
  EXPECT_EQ(s.scale(), 16.0);
  // DeepSpeed: with last_overflow_iter = -1, (cur_iter + 1) % window == 0 at iter 2.
  ASSERT_TRUE(s.Update(false).ok());  // iter 0
  EXPECT_EQ(s.scale(), 16.0);
  ASSERT_TRUE(s.Update(false).ok());  // iter 1
  EXPECT_EQ(s.scale(), 16.0);
  ASSERT_TRUE(s.Update(false).ok());  // iter 2 -> double
  EXPECT_EQ(s.scale(), 32.0);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s.Update(false).ok());
  EXPECT_EQ(s.scale(), 64.0);
}

TEST(LossScaler, HysteresisDelaysTheCut) {
  LossScaler s(Dynamic(10, 1000, 3, 1));
  ASSERT_TRUE(s.Update(true).ok());  // hysteresis 3 -> 2, scale kept
  EXPECT_EQ(s.scale(), 1024.0);
  EXPECT_EQ(s.hysteresis_left(), 2);
  ASSERT_TRUE(s.Update(true).ok());  // 2 -> 1
  EXPECT_EQ(s.scale(), 1024.0);
  ASSERT_TRUE(s.Update(true).ok());  // exhausted: halve
  EXPECT_EQ(s.scale(), 512.0);
  ASSERT_TRUE(s.Update(true).ok());  // still exhausted: halve again
  EXPECT_EQ(s.scale(), 256.0);
}

TEST(LossScaler, WindowCountsFromLastOverflow) {
  LossScaler s(Dynamic(8, 4, 1, 1));
  ASSERT_TRUE(s.Update(false).ok());  // iter 0
  ASSERT_TRUE(s.Update(true).ok());   // iter 1: overflow -> 128, last_overflow = 1
  EXPECT_EQ(s.scale(), 128.0);
  for (int i = 2; i <= 4; ++i) {
    ASSERT_TRUE(s.Update(false).ok());  // iters 2,3,4: (iter-1) % 4 != 0
    EXPECT_EQ(s.scale(), 128.0) << "iter " << i;
  }
  ASSERT_TRUE(s.Update(false).ok());  // iter 5: (5-1) % 4 == 0 -> double
  EXPECT_EQ(s.scale(), 256.0);
}

TEST(LossScaler, ConsecutiveHysteresisRefillsOnCleanSteps) {
  LossScaler s(Dynamic(10, 1000, 2, 1, /*consecutive=*/true));
  ASSERT_TRUE(s.Update(true).ok());
  EXPECT_EQ(s.hysteresis_left(), 1);
  ASSERT_TRUE(s.Update(false).ok());
  EXPECT_EQ(s.hysteresis_left(), 2);
  ASSERT_TRUE(s.Update(true).ok());  // spends hysteresis again, no cut
  EXPECT_EQ(s.scale(), 1024.0);
}

TEST(LossScaler, WithoutConsecutiveHysteresisOnlyRefillsAtWindow) {
  LossScaler s(Dynamic(10, 1000, 2, 1, /*consecutive=*/false));
  ASSERT_TRUE(s.Update(true).ok());
  ASSERT_TRUE(s.Update(false).ok());
  EXPECT_EQ(s.hysteresis_left(), 1);
  ASSERT_TRUE(s.Update(true).ok());  // exhausted: cut
  EXPECT_EQ(s.scale(), 512.0);
}

TEST(LossScaler, FloorsAtMinimumThenFailsClearly) {
  LossScaler s(Dynamic(2, 1000, 1, 2));
  ASSERT_TRUE(s.Update(true).ok());
  EXPECT_EQ(s.scale(), 2.0);
  absl::Status st = s.Update(true);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("minimum loss scale"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("bf16"), std::string::npos) << st.message();
}

TEST(LossScaler, StateRoundTrips) {
  LossScaler a(Dynamic(5, 2, 2, 1));
  ASSERT_TRUE(a.Update(true).ok());
  ASSERT_TRUE(a.Update(false).ok());
  LossScaler b(Dynamic(5, 2, 2, 1));
  b.set_state(a.state());
  for (bool o : {false, true, true, false, false, false}) {
    ASSERT_TRUE(a.Update(o).ok());
    ASSERT_TRUE(b.Update(o).ok());
    EXPECT_EQ(a.scale(), b.scale());
    EXPECT_EQ(a.hysteresis_left(), b.hysteresis_left());
  }
}

}  // namespace
}  // namespace zt
