// LR schedules: values at chosen steps worked out by hand from DeepSpeed's
// deepspeed/runtime/lr_schedules.py, boundaries, monotonicity and OneCycle's
// momentum. Lr(k) is DeepSpeed's lr at last_batch_iteration (lbi) = k - 1,
// and the constructor's value for k = 0 (schedule/lr_scheduler.h).
#include "schedule/lr_scheduler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "util/error.h"

namespace zt {
namespace {

constexpr double kTol = 1e-12;

SchedulerConfig Warmup(SchedulerType type, double min_lr, double max_lr, int64_t steps, WarmupType warmup_type) {
  SchedulerConfig c;
  c.type = type;
  c.warmup_min_lr = min_lr;
  c.warmup_max_lr = max_lr;
  c.warmup_num_steps = steps;
  c.warmup_type = warmup_type;
  return c;
}

TEST(LrScheduler, NoneIsConstantBaseLr) {
  auto s = MakeLrScheduler(SchedulerConfig{}, 3e-4);
  for (int64_t k : {0, 1, 7, 100000}) EXPECT_EQ(s->Lr(k), 3e-4);
  EXPECT_FALSE(s->Momentum(3).has_value());
  EXPECT_FALSE(s->Beta2(3).has_value());
}

// WarmupLR, log: min 0, max 0.1, W = 10. gamma(lbi) = ln(lbi + 1) / ln(10).
TEST(LrScheduler, WarmupLrLog) {
  auto s = MakeLrScheduler(Warmup(SchedulerType::kWarmupLR, 0.0, 0.1, 10, WarmupType::kLog), 1.0);
  EXPECT_EQ(s->Lr(0), 0.0);                                // constructor: warmup_min_lr
  EXPECT_EQ(s->Lr(1), 0.0);                                // lbi 0: ln 1 = 0
  EXPECT_NEAR(s->Lr(2), 0.1 * 0.30102999566398114, kTol);  // lbi 1: ln 2 / ln 10
  EXPECT_NEAR(s->Lr(5), 0.1 * 0.69897000433601875, kTol);  // lbi 4: ln 5 / ln 10
  EXPECT_NEAR(s->Lr(10), 0.1, kTol);                       // lbi 9: ln 10 / ln 10, warmup end
  EXPECT_EQ(s->Lr(11), 0.1);                               // lbi 10 >= W: gamma = 1
  EXPECT_EQ(s->Lr(1000000), 0.1);
  for (int64_t k = 1; k < 30; ++k) EXPECT_LE(s->Lr(k - 1), s->Lr(k) + kTol) << k;
  EXPECT_FALSE(s->Momentum(3).has_value());
}

// WarmupLR, linear: min 0.02, max 0.1, W = 4. gamma(lbi) = lbi / 4, so the
// warmup never reaches max itself: max first applies at k = W + 1.
TEST(LrScheduler, WarmupLrLinear) {
  auto s = MakeLrScheduler(Warmup(SchedulerType::kWarmupLR, 0.02, 0.1, 4, WarmupType::kLinear), 1.0);
  EXPECT_NEAR(s->Lr(0), 0.02, kTol);
  EXPECT_NEAR(s->Lr(1), 0.02, kTol);  // lbi 0: 0/4
  EXPECT_NEAR(s->Lr(2), 0.04, kTol);  // lbi 1: 0.02 + 0.08 * 1/4
  EXPECT_NEAR(s->Lr(3), 0.06, kTol);  // lbi 2: 2/4
  EXPECT_NEAR(s->Lr(4), 0.08, kTol);  // lbi 3: 3/4
  EXPECT_NEAR(s->Lr(5), 0.1, kTol);   // lbi 4 >= W
  EXPECT_NEAR(s->Lr(50), 0.1, kTol);
}

// DeepSpeed stores warmup_num_steps = max(2, W): with W = 1, log warmup uses
// ln(lbi + 1) / ln 2, so lbi 0 gives min and lbi 1 gives max.
TEST(LrScheduler, WarmupOfOneStepBehavesAsTwo) {
  auto s = MakeLrScheduler(Warmup(SchedulerType::kWarmupLR, 0.0, 0.1, 1, WarmupType::kLog), 1.0);
  EXPECT_EQ(s->Lr(1), 0.0);
  EXPECT_NEAR(s->Lr(2), 0.1, kTol);
  EXPECT_NEAR(s->Lr(3), 0.1, kTol);
}

// W = 0, what the Hugging Face Trainer writes by default, is DeepSpeed's
// max(2, 0) = 2 too, for every warm-up schedule.
TEST(LrScheduler, WarmupOfZeroStepsBehavesAsTwo) {
  for (SchedulerType type : {SchedulerType::kWarmupLR, SchedulerType::kWarmupDecayLR}) {
    SchedulerConfig zero = Warmup(type, 0.0, 0.1, 0, WarmupType::kLog);
    SchedulerConfig two = Warmup(type, 0.0, 0.1, 2, WarmupType::kLog);
    zero.total_num_steps = two.total_num_steps = 10;
    ASSERT_TRUE(ValidateSchedulerConfig(zero, 1.0).ok()) << ValidateSchedulerConfig(zero, 1.0);
    auto a = MakeLrScheduler(zero, 1.0), b = MakeLrScheduler(two, 1.0);
    for (int64_t k = 0; k < 12; ++k) EXPECT_EQ(a->Lr(k), b->Lr(k)) << k;
  }
}

// WarmupDecayLR: min 0, max 0.1, W = 4 (linear), T = 12. After warmup
// gamma = max(0, (T - lbi) / max(1, T - W)) = (12 - lbi) / 8.
TEST(LrScheduler, WarmupDecayLr) {
  SchedulerConfig c = Warmup(SchedulerType::kWarmupDecayLR, 0.0, 0.1, 4, WarmupType::kLinear);
  c.total_num_steps = 12;
  auto s = MakeLrScheduler(c, 1.0);
  EXPECT_EQ(s->Lr(0), 0.0);
  EXPECT_NEAR(s->Lr(2), 0.025, kTol);    // lbi 1: 1/4 warmup
  EXPECT_NEAR(s->Lr(4), 0.075, kTol);    // lbi 3: 3/4
  EXPECT_NEAR(s->Lr(5), 0.1, kTol);      // lbi 4: (12 - 4) / 8 = 1, the peak
  EXPECT_NEAR(s->Lr(9), 0.05, kTol);     // lbi 8: 4/8
  EXPECT_NEAR(s->Lr(12), 0.0125, kTol);  // lbi 11: 1/8
  EXPECT_EQ(s->Lr(13), 0.0);             // lbi 12 = T: 0
  EXPECT_EQ(s->Lr(100), 0.0);            // clamped at 0, never negative
  for (int64_t k = 6; k < 20; ++k) EXPECT_LE(s->Lr(k), s->Lr(k - 1)) << k;

  // The decay ends at warmup_min_lr, not at 0: min + delta * 0.
  c.warmup_min_lr = 0.01;
  EXPECT_NEAR(MakeLrScheduler(c, 1.0)->Lr(13), 0.01, kTol);
  EXPECT_NEAR(MakeLrScheduler(c, 1.0)->Lr(9), 0.01 + 0.09 * 0.5, kTol);

  // total < warmup (DeepSpeed only warns): (3 - lbi) / max(1, -1) is <= 0
  // right after warmup, so the lr falls straight to min.
  c.warmup_min_lr = 0.0;
  c.total_num_steps = 3;
  auto short_run = MakeLrScheduler(c, 1.0);
  EXPECT_NEAR(short_run->Lr(4), 0.075, kTol);
  EXPECT_EQ(short_run->Lr(5), 0.0);
}

// WarmupCosineLR: base lr 0.2, W = 5 (linear), T = 15, warmup_min_ratio 0.1,
// cos_min_ratio 0.01.
//   warmup (lbi < 5): ratio = 0.1 + 0.9 * lbi / 5
//   after: p = min(1, (lbi - 5 + 1) / 10); ratio = 0.01 + 0.99 * (1 + cos(pi p)) / 2
TEST(LrScheduler, WarmupCosineLr) {
  SchedulerConfig c = Warmup(SchedulerType::kWarmupCosineLR, 0.0, 0.0, 5, WarmupType::kLinear);
  c.total_num_steps = 15;
  c.warmup_min_ratio = 0.1;
  c.cos_min_ratio = 0.01;
  auto s = MakeLrScheduler(c, 0.2);
  EXPECT_EQ(s->Lr(0), 0.0);            // constructor: DeepSpeed returns 0 before step()
  EXPECT_NEAR(s->Lr(1), 0.02, kTol);   // lbi 0: ratio 0.1
  EXPECT_NEAR(s->Lr(3), 0.092, kTol);  // lbi 2: 0.1 + 0.9 * 0.4 = 0.46
  EXPECT_NEAR(s->Lr(5), 0.164, kTol);  // lbi 4: 0.1 + 0.9 * 0.8 = 0.82
  // lbi 5: p = 1/10; (1 + cos(0.1 pi)) / 2 = (1 + 0.95105651629515357) / 2
  //   = 0.97552825814757679; ratio = 0.01 + 0.99 * that = 0.97577297556610112.
  EXPECT_NEAR(s->Lr(6), 0.2 * 0.97577297556610112, kTol);
  EXPECT_NEAR(s->Lr(10), 0.2 * 0.505, kTol);  // lbi 9: p = 0.5, cos = 0: 0.01 + 0.495
  EXPECT_NEAR(s->Lr(15), 0.2 * 0.01, kTol);   // lbi 14: p = 1: cos_min_ratio
  EXPECT_NEAR(s->Lr(16), 0.2 * 0.01, kTol);   // clamped past the end
  EXPECT_NEAR(s->Lr(1000), 0.2 * 0.01, kTol);
  for (int64_t k = 2; k <= 5; ++k) EXPECT_GT(s->Lr(k), s->Lr(k - 1)) << k;
  for (int64_t k = 7; k <= 30; ++k) EXPECT_LE(s->Lr(k), s->Lr(k - 1)) << k;

  // Log warmup reaches ratio 1 at its last step (lbi W - 1 = 4: ln 5 / ln 5).
  c.warmup_type = WarmupType::kLog;
  EXPECT_NEAR(MakeLrScheduler(c, 0.2)->Lr(5), 0.2, kTol);
  // The ratio scales the optimizer's lr: doubling it doubles every value.
  EXPECT_NEAR(MakeLrScheduler(c, 0.4)->Lr(9), 2 * MakeLrScheduler(c, 0.2)->Lr(9), kTol);
}

SchedulerConfig OneCycleConfig() {
  SchedulerConfig c;
  c.type = SchedulerType::kOneCycle;
  c.cycle_min_lr = 0.01;
  c.cycle_max_lr = 0.1;
  c.cycle_first_step_size = 4;
  c.cycle_second_step_size = 6;  // total 10, step_ratio 0.4
  c.decay_step_size = 2;
  c.decay_lr_rate = 0.5;
  c.cycle_momentum = true;
  c.cycle_min_mom = 0.8;
  c.cycle_max_mom = 0.9;
  c.decay_mom_rate = 0.01;
  return c;
}

// OneCycle, continuous. bi = lbi + 1 = k; x = k / 10 inside the cycle;
// scale = x / 0.4 rising, (x - 1) / (0.4 - 1) falling;
// lr = 0.01 + 0.09 * scale; momentum = 0.9 - 0.1 * scale.
TEST(LrScheduler, OneCycleCycleAndDecay) {
  auto s = MakeLrScheduler(OneCycleConfig(), 123.0);
  EXPECT_NEAR(s->Lr(0), 0.01, kTol);        // constructor writes cycle_min_lr ...
  EXPECT_NEAR(*s->Momentum(0), 0.8, kTol);  // ... and betas (cycle_min_mom, 0.99)
  EXPECT_EQ(*s->Beta2(0), 0.99);
  EXPECT_NEAR(s->Lr(1), 0.0325, kTol);  // x 0.1: scale 0.25
  EXPECT_NEAR(*s->Momentum(1), 0.875, kTol);
  EXPECT_NEAR(s->Lr(2), 0.055, kTol);  // scale 0.5
  EXPECT_NEAR(s->Lr(4), 0.1, kTol);    // x 0.4: the peak, scale 1
  EXPECT_NEAR(*s->Momentum(4), 0.8, kTol);
  EXPECT_NEAR(s->Lr(5), 0.085, kTol);  // x 0.5: scale 0.5 / 0.6 = 5/6
  EXPECT_NEAR(*s->Momentum(5), 0.9 - 0.1 * 5.0 / 6.0, kTol);
  EXPECT_NEAR(s->Lr(7), 0.055, kTol);  // x 0.7: 0.3 / 0.6 = 0.5
  EXPECT_NEAR(s->Lr(10), 0.01, kTol);  // bi 10: next cycle starts, x 0
  EXPECT_NEAR(*s->Momentum(10), 0.9, kTol);
  // Decay: d = lbi - 10 + 1, interval = d / 2;
  // lr = 0.01 / (1 + 0.5 * interval); momentum = 0.9 * (1 + 0.01 * interval).
  EXPECT_NEAR(s->Lr(11), 0.008, kTol);  // d 1: 0.01 / 1.25
  EXPECT_NEAR(*s->Momentum(11), 0.9045, kTol);
  EXPECT_NEAR(s->Lr(14), 0.005, kTol);  // d 4: 0.01 / 2
  EXPECT_NEAR(*s->Momentum(14), 0.918, kTol);
  for (int64_t k = 1; k <= 4; ++k) EXPECT_GT(s->Lr(k), s->Lr(k - 1)) << k;
  for (int64_t k = 5; k <= 30; ++k) EXPECT_LT(s->Lr(k), s->Lr(k - 1)) << k;
  for (int64_t k = 2; k <= 4; ++k) EXPECT_LT(*s->Momentum(k), *s->Momentum(k - 1)) << k;
  for (int64_t k = 5; k <= 10; ++k) EXPECT_GT(*s->Momentum(k), *s->Momentum(k - 1)) << k;
  EXPECT_EQ(*s->Beta2(25), 0.99);
}

// Stair counts (DeepSpeed PR #8179): position in the half = ci * n / half_size
// with ci = bi mod 10 (rising) or (10 - ci) * n / 6 (falling); scale = floor(position) / n.
// First half: 2 stairs over 4 steps; second half: 3 stairs over 6 steps.
TEST(LrScheduler, OneCycleStairs) {
  SchedulerConfig c = OneCycleConfig();
  c.cycle_first_stair_count = 2;
  c.cycle_second_stair_count = 3;
  auto s = MakeLrScheduler(c, 1.0);
  EXPECT_NEAR(s->Lr(1), 0.01, kTol);   // 1 * 2 / 4 = 0.5 -> 0
  EXPECT_NEAR(s->Lr(2), 0.055, kTol);  // 1 -> 1/2
  EXPECT_NEAR(s->Lr(3), 0.055, kTol);  // 1.5 -> 1/2
  EXPECT_NEAR(s->Lr(4), 0.1, kTol);    // 2 -> 1: the peak is kept
  EXPECT_NEAR(s->Lr(5), 0.07, kTol);   // (10 - 5) * 3 / 6 = 2.5 -> 2/3
  EXPECT_NEAR(s->Lr(6), 0.07, kTol);   // 2 -> 2/3
  EXPECT_NEAR(s->Lr(7), 0.04, kTol);   // 1.5 -> 1/3
  EXPECT_NEAR(s->Lr(8), 0.04, kTol);   // 1 -> 1/3
  EXPECT_NEAR(s->Lr(9), 0.01, kTol);   // 0.5 -> 0
  EXPECT_NEAR(s->Lr(10), 0.01, kTol);
  EXPECT_NEAR(*s->Momentum(5), 0.9 - 0.1 * 2.0 / 3.0, kTol);
  EXPECT_NEAR(*s->Momentum(2), 0.85, kTol);
}

TEST(LrScheduler, OneCycleWithoutDecayOrMomentum) {
  SchedulerConfig c = OneCycleConfig();
  c.decay_step_size = 0;  // no decay: lr stays at cycle_min_lr, momentum at max
  auto s = MakeLrScheduler(c, 1.0);
  EXPECT_NEAR(s->Lr(11), 0.01, kTol);
  EXPECT_NEAR(s->Lr(500), 0.01, kTol);
  EXPECT_NEAR(*s->Momentum(500), 0.9, kTol);
  c = OneCycleConfig();
  c.decay_lr_rate = 0.0;  // lr decay off, momentum decay still on
  s = MakeLrScheduler(c, 1.0);
  EXPECT_NEAR(s->Lr(14), 0.01, kTol);
  EXPECT_NEAR(*s->Momentum(14), 0.918, kTol);
  c.cycle_momentum = false;
  s = MakeLrScheduler(c, 1.0);
  EXPECT_FALSE(s->Momentum(0).has_value());
  EXPECT_FALSE(s->Momentum(3).has_value());
  EXPECT_FALSE(s->Beta2(3).has_value());
}

// LRRangeTest: min 1e-3, step size 4, rate 0.5:
// lr = 1e-3 * (1 + 0.5 * interval), interval = k / 4 (floored with staircase).
TEST(LrScheduler, LrRangeTest) {
  SchedulerConfig c;
  c.type = SchedulerType::kLRRangeTest;
  c.lr_range_test_min_lr = 1e-3;
  c.lr_range_test_step_size = 4;
  c.lr_range_test_step_rate = 0.5;
  auto s = MakeLrScheduler(c, 1.0);
  EXPECT_NEAR(s->Lr(0), 1e-3, kTol);
  EXPECT_NEAR(s->Lr(1), 1.125e-3, kTol);
  EXPECT_NEAR(s->Lr(4), 1.5e-3, kTol);
  EXPECT_NEAR(s->Lr(10), 2.25e-3, kTol);
  c.lr_range_test_staircase = true;
  s = MakeLrScheduler(c, 1.0);
  EXPECT_NEAR(s->Lr(3), 1e-3, kTol);    // floor(3/4) = 0
  EXPECT_NEAR(s->Lr(4), 1.5e-3, kTol);  // floor(1) = 1
  EXPECT_NEAR(s->Lr(7), 1.5e-3, kTol);
  EXPECT_NEAR(s->Lr(8), 2e-3, kTol);
  for (int64_t k = 1; k < 40; ++k) EXPECT_GE(s->Lr(k), s->Lr(k - 1)) << k;
}

void ExpectRejected(const SchedulerConfig& c, const std::string& key) {
  const absl::Status status = ValidateSchedulerConfig(c, 1e-3);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << key;
  EXPECT_NE(std::string(status.message()).find(key), std::string::npos) << status.message();
  EXPECT_THROW(MakeLrScheduler(c, 1e-3), Error) << key;
}

TEST(LrScheduler, RejectsConfigsDeepSpeedCannotRun) {
  SchedulerConfig c = Warmup(SchedulerType::kWarmupLR, 0.0, 0.1, -1, WarmupType::kLog);
  ExpectRejected(c, "scheduler.params.warmup_num_steps");
  c = Warmup(SchedulerType::kWarmupDecayLR, 0.0, 0.1, 10, WarmupType::kLog);
  ExpectRejected(c, "scheduler.params.total_num_steps");
  c.type = SchedulerType::kWarmupCosineLR;
  ExpectRejected(c, "scheduler.params.total_num_steps");
  c = OneCycleConfig();
  c.cycle_first_step_size = 0;
  ExpectRejected(c, "cycle_first_step_size");
  c = OneCycleConfig();
  c.cycle_second_stair_count = -1;
  ExpectRejected(c, "cycle_second_stair_count");
  c = OneCycleConfig();
  c.decay_step_size = -2;
  ExpectRejected(c, "decay_step_size");
  c = SchedulerConfig{};
  c.type = SchedulerType::kLRRangeTest;
  c.lr_range_test_step_size = 0;
  ExpectRejected(c, "lr_range_test_step_size");
  EXPECT_TRUE(ValidateSchedulerConfig(OneCycleConfig(), 1e-3).ok());
}

TEST(LrSchedulerDeathTest, NegativeStepCountIsAnInvariantViolation) {
  auto s = MakeLrScheduler(SchedulerConfig{}, 1e-3);
  EXPECT_DEATH(s->Lr(-1), "steps_taken");
}

}  // namespace
}  // namespace zt
