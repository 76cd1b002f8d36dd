// Learning-rate schedules with DeepSpeed's semantics (WarmupLR, WarmupDecayLR,
// WarmupCosineLR, OneCycle, LRRangeTest), as pure functions of the number of
// optimizer steps already taken. Being stateless apart from that count makes
// them trivial to checkpoint (DeepSpeed's last_batch_iteration).
//
//   auto sched = zt::MakeLrScheduler(config.scheduler, config.optimizer.lr);
//   double lr = sched->Lr(global_step);  // lr for the step about to run
//
// Mapping to DeepSpeed (deepspeed/runtime/lr_schedules.py on master, which
// includes the OneCycle stair-count fix, PR #8179): DeepSpeed builds the
// scheduler with last_batch_iteration = -1, and the constructor writes the
// lr (and OneCycle betas) for the first optimizer step into the optimizer.
// The engine calls scheduler.step() after every applied optimizer step (not
// after steps skipped for fp16 overflow), which increments
// last_batch_iteration and writes the lr for the next step. Therefore
//
//   Lr(k) == the lr DeepSpeed's optimizer uses for its (k+1)-th applied step
//         == DeepSpeed's get_lr() with last_batch_iteration = k - 1,
//
// and for k = 0 the value the constructor set: warmup_min_lr (WarmupLR,
// WarmupDecayLR), 0 (WarmupCosineLR), cycle_min_lr (OneCycle), min lr
// (LRRangeTest). `steps_taken` must count applied optimizer steps only (an
// fp16 overflow skip does not advance the schedule) and is >= 0.
//
// Thread-safety: schedulers are immutable; all methods are const and pure.
// Formulas: docs/optimizers.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "config/config.h"

namespace zt {

class LrScheduler {
 public:
  virtual ~LrScheduler() = default;
  // The learning rate the optimizer uses for its (`steps_taken` + 1)-th step,
  // i.e. after `steps_taken` optimizer steps have completed.
  virtual double Lr(int64_t steps_taken) const = 0;
  // OneCycle with cycle_momentum: the momentum (Adam beta1 / SGD momentum)
  // for that step; nullopt for schedules that leave momentum alone.
  virtual std::optional<double> Momentum(int64_t /*steps_taken*/) const { return std::nullopt; }
  // OneCycle with cycle_momentum: DeepSpeed writes betas = (momentum, 0.99)
  // into the optimizer, so beta2 is 0.99 for every step; nullopt otherwise.
  // Feed it to ops::StepHyper::beta2 to reproduce DeepSpeed exactly.
  virtual std::optional<double> Beta2(int64_t /*steps_taken*/) const { return std::nullopt; }
};

// SchedulerType::kNone yields a constant schedule at `base_lr` (the
// optimizer's lr). WarmupCosineLR scales `base_lr`; the others set absolute lrs.
// Throws zt::Error (InvalidArgument, naming the "scheduler.params" key) for
// a config ValidateSchedulerConfig rejects.
std::unique_ptr<LrScheduler> MakeLrScheduler(const SchedulerConfig& config, double base_lr);

// OK if MakeLrScheduler accepts `config`: step counts and sizes DeepSpeed
// divides by are positive (warmup_num_steps may be 0: below 2 it acts as 2,
// as in DeepSpeed), total_num_steps is set where DeepSpeed requires it,
// rates are finite, stair counts are >= 0.
absl::Status ValidateSchedulerConfig(const SchedulerConfig& config, double base_lr);

}  // namespace zt
