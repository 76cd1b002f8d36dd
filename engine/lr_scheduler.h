// Learning-rate schedules with DeepSpeed's semantics (WarmupLR, WarmupDecayLR,
// WarmupCosineLR, OneCycle, LRRangeTest), as pure functions of the number of
// optimizer steps already taken. Being stateless apart from that count makes
// them trivial to checkpoint (DeepSpeed's last_batch_iteration).
//
//   auto sched = zt::MakeLrScheduler(config.scheduler, config.optimizer.lr);
//   double lr = sched->Lr(global_step);  // lr for the step about to run
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

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
};

// SchedulerType::kNone yields a constant schedule at `base_lr` (the
// optimizer's lr). WarmupCosineLR scales `base_lr`; the others set absolute lrs.
std::unique_ptr<LrScheduler> MakeLrScheduler(const SchedulerConfig& config, double base_lr);

}  // namespace zt
