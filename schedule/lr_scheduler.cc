// DeepSpeed's lr schedules (schedule/lr_scheduler.h) evaluated in closed form.
// Each class computes DeepSpeed's get_lr() for a given last_batch_iteration
// with the same double-precision expressions, so values agree to the last
// bit where the operations are the same; "lbi" below is last_batch_iteration.
#include "schedule/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "util/error.h"
#include "util/status.h"

namespace zt {
namespace {

constexpr double kPi = 3.14159265358979323846;  // Python's math.pi

// lr for the (k+1)-th step is DeepSpeed's value at lbi = k - 1 (header).
int64_t LastBatchIteration(int64_t steps_taken) {
  ZT_CHECK_MSG(steps_taken >= 0, "steps_taken = %lld must be >= 0", static_cast<long long>(steps_taken));
  return steps_taken - 1;
}

class ConstantLr final : public LrScheduler {
 public:
  explicit ConstantLr(double lr) : lr_(lr) {}
  double Lr(int64_t steps_taken) const override {
    LastBatchIteration(steps_taken);
    return lr_;
  }

 private:
  double lr_;
};

// WarmupLR._get_gamma during warmup (lbi < warmup_num_steps, lbi >= 0).
// warmup_num_steps is already max(2, configured), as DeepSpeed stores it.
double WarmupGamma(int64_t lbi, int64_t warmup_num_steps, WarmupType type) {
  if (type == WarmupType::kLog) {
    const double inverse_log_warm_up = 1.0 / std::log(static_cast<double>(warmup_num_steps));
    return inverse_log_warm_up * std::log(static_cast<double>(lbi + 1));
  }
  return static_cast<double>(lbi) / static_cast<double>(warmup_num_steps);
}

// WarmupLR and, with decay, WarmupDecayLR:
//   lbi < 0 : warmup_min_lr (what the constructor writes)
//   lbi < W : min + (max - min) * gamma, gamma = ln(lbi + 1) / ln(W) or lbi / W
//   else    : WarmupLR: max;  WarmupDecayLR: min + (max - min) *
//             max(0, (T - lbi) / max(1, T - W))
class WarmupLr final : public LrScheduler {
 public:
  WarmupLr(const SchedulerConfig& c, bool decay)
      : min_lr_(c.warmup_min_lr),
        delta_lr_(c.warmup_max_lr - c.warmup_min_lr),
        warmup_num_steps_(std::max<int64_t>(2, c.warmup_num_steps)),
        type_(c.warmup_type),
        decay_(decay),
        total_num_steps_(c.total_num_steps) {}

  double Lr(int64_t steps_taken) const override {
    const int64_t lbi = LastBatchIteration(steps_taken);
    if (lbi < 0) return min_lr_;
    return min_lr_ + delta_lr_ * Gamma(lbi);
  }

 private:
  double Gamma(int64_t lbi) const {
    if (lbi < warmup_num_steps_) return WarmupGamma(lbi, warmup_num_steps_, type_);
    if (!decay_) return 1.0;
    return std::max(0.0, static_cast<double>(total_num_steps_ - lbi) /
                             std::max(1.0, static_cast<double>(total_num_steps_ - warmup_num_steps_)));
  }

  double min_lr_;
  double delta_lr_;
  int64_t warmup_num_steps_;
  WarmupType type_;
  bool decay_;
  int64_t total_num_steps_;
};

// WarmupCosineLR: base_lr times
//   lbi < 0 : 0
//   lbi < W : r0 + (1 - r0) * gamma                       (r0 = warmup_min_ratio)
//   else    : max(0, rc + (1 - rc) * (1 + cos(pi * p)) / 2)   (rc = cos_min_ratio)
//             with p = min(1, (lbi - W + 1) / max(1, T - W))
class WarmupCosineLr final : public LrScheduler {
 public:
  WarmupCosineLr(const SchedulerConfig& c, double base_lr)
      : base_lr_(base_lr),
        warmup_min_ratio_(c.warmup_min_ratio),
        cos_min_ratio_(c.cos_min_ratio),
        warmup_num_steps_(std::max<int64_t>(2, c.warmup_num_steps)),
        type_(c.warmup_type),
        total_num_steps_(c.total_num_steps) {}

  double Lr(int64_t steps_taken) const override {
    const int64_t lbi = LastBatchIteration(steps_taken);
    if (lbi < 0) return 0.0;
    return base_lr_ * Ratio(lbi);
  }

 private:
  double Ratio(int64_t lbi) const {
    if (lbi < warmup_num_steps_) {
      const double ratio = WarmupGamma(lbi, warmup_num_steps_, type_);
      return warmup_min_ratio_ + ratio * (1.0 - warmup_min_ratio_);
    }
    const double real_last_step = static_cast<double>(lbi - warmup_num_steps_ + 1);
    const double real_total_steps = static_cast<double>(std::max<int64_t>(1, total_num_steps_ - warmup_num_steps_));
    const double progress = std::min(1.0, real_last_step / real_total_steps);
    const double ratio = (1.0 + std::cos(kPi * progress)) / 2.0;
    return std::max(0.0, cos_min_ratio_ + (1.0 - cos_min_ratio_) * ratio);
  }

  double base_lr_;
  double warmup_min_ratio_;
  double cos_min_ratio_;
  int64_t warmup_num_steps_;
  WarmupType type_;
  int64_t total_num_steps_;
};

// OneCycle: one triangular cycle of total = first + second steps, then decay.
//   lbi < total: bi = lbi + 1; x = position in the cycle in [0, 1);
//     scale = x / r on the way up (x <= r = first/total), (x - 1) / (r - 1) down;
//     a stair count n > 0 holds scale at floor(n * fraction of the half) / n;
//     lr = min_lr + (max_lr - min_lr) * scale, mom = max_mom - (max_mom - min_mom) * scale
//   else: d = lbi - total + 1;
//     lr  = min_lr / (1 + decay_lr_rate * d / decay_step_size)   (min_lr if no decay)
//     mom = max_mom * (1 + decay_mom_rate * d / decay_step_size)  (max_mom if no decay)
// Before the first step (lbi = -1) the constructor writes lr = min_lr and
// betas = (min_mom, 0.99).
class OneCycleLr final : public LrScheduler {
 public:
  explicit OneCycleLr(const SchedulerConfig& c)
      : first_step_size_(static_cast<double>(c.cycle_first_step_size)),
        second_step_size_(static_cast<double>(c.cycle_second_step_size)),
        total_size_(first_step_size_ + second_step_size_),
        step_ratio_(first_step_size_ / total_size_),
        first_stair_count_(c.cycle_first_stair_count),
        second_stair_count_(c.cycle_second_stair_count),
        decay_step_size_(c.decay_step_size),
        min_lr_(c.cycle_min_lr),
        max_lr_(c.cycle_max_lr),
        decay_lr_rate_(c.decay_lr_rate),
        cycle_momentum_(c.cycle_momentum),
        min_mom_(c.cycle_min_mom),
        max_mom_(c.cycle_max_mom),
        decay_mom_rate_(c.decay_mom_rate),
        // DeepSpeed: math.isclose(x, 0) with default tolerances is x == 0.
        skip_lr_decay_(c.decay_step_size == 0 || c.decay_lr_rate == 0.0),
        skip_mom_decay_(c.decay_step_size == 0 || c.decay_mom_rate == 0.0) {}

  double Lr(int64_t steps_taken) const override {
    const int64_t lbi = LastBatchIteration(steps_taken);
    if (lbi < 0) return min_lr_;
    if (static_cast<double>(lbi) < total_size_) {
      return min_lr_ + (max_lr_ - min_lr_) * ScaleFactor(lbi);
    }
    if (skip_lr_decay_) return min_lr_;
    return min_lr_ / (1.0 + decay_lr_rate_ * DecayInterval(lbi));
  }

  std::optional<double> Momentum(int64_t steps_taken) const override {
    const int64_t lbi = LastBatchIteration(steps_taken);
    if (!cycle_momentum_) return std::nullopt;
    if (lbi < 0) return min_mom_;
    if (static_cast<double>(lbi) < total_size_) {
      return max_mom_ - (max_mom_ - min_mom_) * ScaleFactor(lbi);
    }
    if (skip_mom_decay_) return max_mom_;
    return max_mom_ * (1.0 + decay_mom_rate_ * DecayInterval(lbi));
  }

  std::optional<double> Beta2(int64_t steps_taken) const override {
    LastBatchIteration(steps_taken);
    if (!cycle_momentum_) return std::nullopt;
    return 0.99;
  }

 private:
  // OneCycle._get_scale_factor, expression for expression.
  double ScaleFactor(int64_t lbi) const {
    const double batch_iteration = static_cast<double>(lbi + 1);
    const double cycle = std::floor(1.0 + batch_iteration / total_size_);
    const double x = 1.0 + batch_iteration / total_size_ - cycle;
    double scale_factor;
    int64_t stair_count;
    if (x <= step_ratio_) {
      scale_factor = x / step_ratio_;
      stair_count = first_stair_count_;
    } else {
      scale_factor = (x - 1.0) / (step_ratio_ - 1.0);
      stair_count = second_stair_count_;
    }
    if (stair_count > 0) {
      const double cycle_iteration = std::fmod(batch_iteration, total_size_);
      const double stairs = static_cast<double>(stair_count);
      const double stair_position = cycle_iteration <= first_step_size_
                                        ? cycle_iteration * stairs / first_step_size_
                                        : (total_size_ - cycle_iteration) * stairs / second_step_size_;
      scale_factor = std::floor(stair_position) / stairs;
    }
    return scale_factor;
  }

  // decay_batch_iteration / decay_step_size with decay_batch_iteration = lbi - total + 1.
  double DecayInterval(int64_t lbi) const {
    const double decay_batch_iteration = static_cast<double>(lbi) - total_size_ + 1.0;
    return decay_batch_iteration / static_cast<double>(decay_step_size_);
  }

  double first_step_size_;
  double second_step_size_;
  double total_size_;
  double step_ratio_;
  int64_t first_stair_count_;
  int64_t second_stair_count_;
  int64_t decay_step_size_;
  double min_lr_;
  double max_lr_;
  double decay_lr_rate_;
  bool cycle_momentum_;
  double min_mom_;
  double max_mom_;
  double decay_mom_rate_;
  bool skip_lr_decay_;
  bool skip_mom_decay_;
};

// LRRangeTest: min_lr * (1 + step_rate * interval), interval = (lbi + 1) / step_size,
// floored when staircase. At lbi = -1 that is min_lr, which the constructor writes.
class LrRangeTest final : public LrScheduler {
 public:
  explicit LrRangeTest(const SchedulerConfig& c)
      : min_lr_(c.lr_range_test_min_lr),
        step_size_(static_cast<double>(c.lr_range_test_step_size)),
        step_rate_(c.lr_range_test_step_rate),
        staircase_(c.lr_range_test_staircase) {}

  double Lr(int64_t steps_taken) const override {
    const int64_t lbi = LastBatchIteration(steps_taken);
    double interval = static_cast<double>(lbi + 1) / step_size_;
    if (staircase_) interval = std::floor(interval);
    return min_lr_ * (1.0 + step_rate_ * interval);
  }

 private:
  double min_lr_;
  double step_size_;
  double step_rate_;
  bool staircase_;
};

absl::Status Invalid(const char* schedule, const char* key, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat("scheduler.params.", key, " (", schedule, "): ", problem));
}

absl::Status CheckFinite(const char* schedule, const char* key, double value) {
  if (std::isfinite(value)) return absl::OkStatus();
  return Invalid(schedule, key, absl::StrCat(value, " must be a finite number"));
}

absl::Status CheckPositive(const char* schedule, const char* key, int64_t value, const char* why) {
  if (value > 0) return absl::OkStatus();
  return Invalid(schedule, key, absl::StrCat(value, " must be a positive integer (", why, ")"));
}

// DeepSpeed runs any warm-up below 2 steps as 2 (max(2, warmup_num_steps)),
// 0 included: the Hugging Face Trainer writes 0 by default.
absl::Status ValidateWarmup(const char* schedule, const SchedulerConfig& c) {
  if (c.warmup_num_steps >= 0) return absl::OkStatus();
  return Invalid(schedule, "warmup_num_steps",
                 absl::StrCat(c.warmup_num_steps,
                              " must be >= 0 (the number of steps to warm up over; below 2 acts "
                              "as 2, as in DeepSpeed)"));
}

}  // namespace

absl::Status ValidateSchedulerConfig(const SchedulerConfig& c, double base_lr) {
  switch (c.type) {
    case SchedulerType::kNone: return CheckFinite("none", "lr", base_lr);
    case SchedulerType::kWarmupLR:
    case SchedulerType::kWarmupDecayLR: {
      const char* name = c.type == SchedulerType::kWarmupLR ? "WarmupLR" : "WarmupDecayLR";
      ZT_RETURN_IF_ERROR(ValidateWarmup(name, c));
      ZT_RETURN_IF_ERROR(CheckFinite(name, "warmup_min_lr", c.warmup_min_lr));
      ZT_RETURN_IF_ERROR(CheckFinite(name, "warmup_max_lr", c.warmup_max_lr));
      if (c.type == SchedulerType::kWarmupDecayLR) {
        ZT_RETURN_IF_ERROR(CheckPositive(name, "total_num_steps", c.total_num_steps,
                                         "required: the optimizer steps of the whole run"));
      }
      return absl::OkStatus();
    }
    case SchedulerType::kWarmupCosineLR:
      ZT_RETURN_IF_ERROR(ValidateWarmup("WarmupCosineLR", c));
      ZT_RETURN_IF_ERROR(CheckPositive("WarmupCosineLR", "total_num_steps", c.total_num_steps,
                                       "required: the optimizer steps of the whole run"));
      ZT_RETURN_IF_ERROR(CheckFinite("WarmupCosineLR", "warmup_min_ratio", c.warmup_min_ratio));
      ZT_RETURN_IF_ERROR(CheckFinite("WarmupCosineLR", "cos_min_ratio", c.cos_min_ratio));
      if (!(std::isfinite(base_lr))) {
        return absl::InvalidArgumentError(absl::StrCat("optimizer.params.lr = ", base_lr,
                                                       " must be finite: WarmupCosineLR scales the optimizer's lr"));
      }
      return absl::OkStatus();
    case SchedulerType::kOneCycle:
      ZT_RETURN_IF_ERROR(
          CheckPositive("OneCycle", "cycle_first_step_size", c.cycle_first_step_size, "steps in the rising half"));
      ZT_RETURN_IF_ERROR(
          CheckPositive("OneCycle", "cycle_second_step_size", c.cycle_second_step_size, "steps in the falling half"));
      if (c.cycle_first_stair_count < 0 || c.cycle_second_stair_count < 0) {
        return Invalid("OneCycle",
                       c.cycle_first_stair_count < 0 ? "cycle_first_stair_count" : "cycle_second_stair_count",
                       "must be >= 0 (0 = continuous, n = n flat stairs per half cycle)");
      }
      if (c.decay_step_size < 0) {
        return Invalid("OneCycle", "decay_step_size",
                       absl::StrCat(c.decay_step_size, " must be >= 0 (0 = no decay after the cycle)"));
      }
      ZT_RETURN_IF_ERROR(CheckFinite("OneCycle", "cycle_min_lr", c.cycle_min_lr));
      ZT_RETURN_IF_ERROR(CheckFinite("OneCycle", "cycle_max_lr", c.cycle_max_lr));
      ZT_RETURN_IF_ERROR(CheckFinite("OneCycle", "decay_lr_rate", c.decay_lr_rate));
      ZT_RETURN_IF_ERROR(CheckFinite("OneCycle", "cycle_min_mom", c.cycle_min_mom));
      ZT_RETURN_IF_ERROR(CheckFinite("OneCycle", "cycle_max_mom", c.cycle_max_mom));
      ZT_RETURN_IF_ERROR(CheckFinite("OneCycle", "decay_mom_rate", c.decay_mom_rate));
      return absl::OkStatus();
    case SchedulerType::kLRRangeTest:
      ZT_RETURN_IF_ERROR(
          CheckPositive("LRRangeTest", "lr_range_test_step_size", c.lr_range_test_step_size, "steps per lr increase"));
      ZT_RETURN_IF_ERROR(CheckFinite("LRRangeTest", "lr_range_test_min_lr", c.lr_range_test_min_lr));
      ZT_RETURN_IF_ERROR(CheckFinite("LRRangeTest", "lr_range_test_step_rate", c.lr_range_test_step_rate));
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("scheduler.type: unsupported value ", static_cast<int>(c.type)));
}

std::unique_ptr<LrScheduler> MakeLrScheduler(const SchedulerConfig& config, double base_lr) {
  ThrowIfError(ValidateSchedulerConfig(config, base_lr));
  switch (config.type) {
    case SchedulerType::kNone: return std::make_unique<ConstantLr>(base_lr);
    case SchedulerType::kWarmupLR: return std::make_unique<WarmupLr>(config, /*decay=*/false);
    case SchedulerType::kWarmupDecayLR: return std::make_unique<WarmupLr>(config, /*decay=*/true);
    case SchedulerType::kWarmupCosineLR: return std::make_unique<WarmupCosineLr>(config, base_lr);
    case SchedulerType::kOneCycle: return std::make_unique<OneCycleLr>(config);
    case SchedulerType::kLRRangeTest: return std::make_unique<LrRangeTest>(config);
  }
  throw Error(absl::InvalidArgumentError("scheduler.type: unsupported value"));
}

}  // namespace zt
