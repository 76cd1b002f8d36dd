// Implementation of engine/loss_scaler.h, following DeepSpeed's
// DynamicLossScaler.update_scale step for step (scale factor 2).
#include "engine/loss_scaler.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace zt {

LossScaler LossScaler::Disabled() { return LossScaler(); }

LossScaler::LossScaler(const Fp16Config& config) {
  enabled_ = config.enabled;
  if (!enabled_) return;
  dynamic_ = config.dynamic();
  scale_ = dynamic_ ? std::ldexp(1.0, config.initial_scale_power) : config.loss_scale;
  min_scale_ = config.min_loss_scale;
  window_ = config.loss_scale_window;
  hysteresis_ = config.hysteresis;
  consecutive_hysteresis_ = config.consecutive_hysteresis;
  cur_hysteresis_ = hysteresis_;
}

absl::Status LossScaler::Update(bool overflow) {
  if (!enabled_ || !dynamic_) {
    ++cur_iter_;
    return absl::OkStatus();
  }
  if (overflow) {
    if (hysteresis_ == 1 || cur_hysteresis_ == 1) {
      if (scale_ <= min_scale_) {
        return absl::FailedPreconditionError(
            absl::StrFormat("fp16 gradients overflowed (inf/nan) at the minimum loss scale %g (step %d): the "
                            "model diverges or overflows in fp16 even without scaling. Lower the learning rate, "
                            "enable gradient_clipping, lower fp16.min_loss_scale, or train in bf16 instead.",
                            scale_, cur_iter_));
      }
      scale_ = std::max(scale_ / 2.0, min_scale_);
    } else {
      --cur_hysteresis_;
    }
    last_overflow_iter_ = cur_iter_;
  } else {
    if (consecutive_hysteresis_) cur_hysteresis_ = hysteresis_;
    if ((cur_iter_ - last_overflow_iter_) % window_ == 0) {
      if (!consecutive_hysteresis_) cur_hysteresis_ = hysteresis_;
      scale_ *= 2.0;
    }
  }
  ++cur_iter_;
  return absl::OkStatus();
}

void LossScaler::set_state(const State& s) {
  scale_ = s.scale;
  cur_iter_ = s.cur_iter;
  last_overflow_iter_ = s.last_overflow_iter;
  cur_hysteresis_ = s.cur_hysteresis;
}

}  // namespace zt
