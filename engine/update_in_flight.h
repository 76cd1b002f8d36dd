// UpdateInFlight: the one owner of the optimizer update's schedule
// (plan/update_schedule.h) and of the update while it is under way. The
// engine calls it at named points of a step -- before and after Backward,
// at each reduced group, in Step, and Finish before anything that reads the
// parameters or the optimizer state -- and the parameter coordinator sees
// it only as a zero::PendingUpdate. Internal to zt_engine.
//
// Failure is sticky: an update that failed half-way leaves the optimizer
// state partly updated, so status() stays that error and every later
// Backward or Step throws it (resume from a checkpoint).
#pragma once

#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "ops/shard_optimizer.h"
#include "plan/update_schedule.h"
#include "zero/param_coordinator.h"
#include "zero/pending_update.h"
#include "zero/sharded_optimizer.h"

namespace zt {

class UpdateInFlight final : public zero::PendingUpdate {
 public:
  // `optimizer` and `coordinator` (null below stage 3) outlive this object.
  // `first_deferred_group`: where the update at gather starts (the
  // coordinator's FirstDeferrableGroup; unused by schedules without it).
  UpdateInFlight(plan::UpdateSchedule schedule, int first_deferred_group, zero::ShardedOptimizer& optimizer,
                 zero::ParamCoordinator* coordinator);
  // The coordinator consults this object from now on (update at gather).
  void Attach();

  plan::UpdateSchedule schedule() const { return schedule_; }
  const absl::Status& status() const { return status_; }
  // Throws status() when the update failed earlier.
  void ThrowIfFailed() const;

  // Backward, before the reducer starts: a boundary Backward while the
  // update during backward is still open (no Step after the last one) is
  // refused (FailedPrecondition).
  void CheckBackwardMayStart() const;
  // Backward, after the reducer started: at the boundary with an update
  // during backward, opens it with the step's multiplier (asked only then)
  // and hyper-parameters.
  void OpenInBackward(bool boundary, const std::function<double()>& multiplier, const ops::StepHyper& hyper);
  // The reducer finished group g's gradients (only with an update during
  // backward): groups whose gradients are all final are updated.
  void OnGroupReduced(int g);
  // Backward failed: with the update under way, the failure is sticky.
  void OnBackwardFailed(const absl::Status& failure);
  // Backward ended at the boundary: starts reading the swapped parameter
  // shards the step (or, with an update at gather, the next forward)
  // updates first.
  void AfterBackward(bool boundary);

  // Step at the boundary: completes or runs the update (`multiplier` asked
  // where the update is computed now). Returns true when a part is left for
  // the next forward (the update at gather).
  bool RunStep(const std::function<double()>& multiplier, const ops::StepHyper& hyper);
  // After the step gathered the updated parameters: with a part left for
  // the forward, the coordinator marks the persistent chunks it leaves stale.
  void AfterStepGather(bool pending);

  // Completes an update still pending for the forward (and regathers the
  // persistent chunks it changed): collective, every rank at the same point.
  // A no-op without the update at gather. Throws zt::Error; a failure is
  // sticky. FinishStatus also returns an earlier failure.
  void Finish();
  absl::Status FinishStatus();

  // zero::PendingUpdate, for the coordinator.
  bool open() const override { return optimizer_.deferred_open(); }
  int updated_groups() const override { return optimizer_.updated_groups(); }
  void UpdateThrough(int g) override { optimizer_.UpdateThrough(g); }

 private:
  void Fail(const char* what, const absl::Status& failure);

  const plan::UpdateSchedule schedule_;
  const int first_deferred_group_;
  zero::ShardedOptimizer& optimizer_;
  zero::ParamCoordinator* const coordinator_;
  // The update during backward: which groups' gradients are final in the
  // boundary backward under way, and the lowest k with k..G-1 all final.
  std::vector<char> reduced_groups_;
  int first_final_group_ = 0;
  absl::Status status_;
};

}  // namespace zt
