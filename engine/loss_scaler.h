// Loss scaling for fp16 training, with DeepSpeed's semantics:
//  * static (fp16.loss_scale > 0): the scale never changes;
//  * dynamic: start at 2^initial_scale_power; on an overflow either spend one
//    unit of hysteresis or, when hysteresis is exhausted, halve the scale
//    (floored at min_loss_scale); after loss_scale_window overflow-free steps
//    double it. consecutive_hysteresis refills hysteresis on every clean step.
// Overflowing at min_loss_scale again is fatal (Update returns an error that
// says what to change) instead of DeepSpeed's endless "skipping step" loop.
//
// Not thread-safe; the engine calls it once per optimizer step on every rank,
// with the same overflow flag (already agreed across ranks).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "config/config.h"

namespace zt {

class LossScaler {
 public:
  // A disabled scaler (fp32/bf16) has scale 1 and never reports overflow.
  static LossScaler Disabled();
  explicit LossScaler(const Fp16Config& config);

  bool enabled() const { return enabled_; }
  bool dynamic() const { return dynamic_; }
  double scale() const { return scale_; }
  int hysteresis_left() const { return cur_hysteresis_; }

  // Records one optimizer step's outcome and adjusts the scale.
  absl::Status Update(bool overflow);

  // State for checkpoints.
  struct State {
    double scale = 1.0;
    int64_t cur_iter = 0;
    int64_t last_overflow_iter = -1;
    int cur_hysteresis = 1;
  };
  State state() const { return {scale_, cur_iter_, last_overflow_iter_, cur_hysteresis_}; }
  void set_state(const State& s);

 private:
  LossScaler() = default;

  bool enabled_ = false;
  bool dynamic_ = false;
  double scale_ = 1.0;
  double min_scale_ = 1.0;
  int64_t window_ = 1000;
  int hysteresis_ = 1;  // DeepSpeed's delayed_shift
  bool consecutive_hysteresis_ = false;

  int64_t cur_iter_ = 0;
  int64_t last_overflow_iter_ = -1;
  int cur_hysteresis_ = 1;
};

}  // namespace zt
