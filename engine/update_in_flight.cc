#include "engine/update_in_flight.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "util/error.h"
#include "util/status.h"

namespace zt {

UpdateInFlight::UpdateInFlight(plan::UpdateSchedule schedule, int first_deferred_group,
                               zero::ShardedOptimizer& optimizer, zero::ParamCoordinator* coordinator)
    : schedule_(schedule),
      first_deferred_group_(first_deferred_group),
      optimizer_(optimizer),
      coordinator_(coordinator) {
  ZT_CHECK_MSG(!plan::UpdatesAtGather(schedule) || coordinator != nullptr,
               "the update at gather needs the stage-3 coordinator");
}

void UpdateInFlight::Attach() {
  if (plan::UpdatesAtGather(schedule_)) coordinator_->SetPendingUpdate(this);
}

void UpdateInFlight::ThrowIfFailed() const {
  if (!status_.ok()) throw Error(status_);
}

void UpdateInFlight::Fail(const char* what, const absl::Status& failure) {
  status_ = absl::FailedPreconditionError(absl::StrCat(what, ", so the optimizer state is partly updated (",
                                                       failure.message(), "); resume from the last checkpoint"));
}

void UpdateInFlight::CheckBackwardMayStart() const {
  if (optimizer_.early_step_open()) {
    throw Error(absl::FailedPreconditionError(
        "engine.Backward was called again at the accumulation boundary before engine.Step: with the optimizer "
        "update running during backward (NVMe optimizer offload at stage 3) every boundary Backward must be "
        "followed by Step"));
  }
}

void UpdateInFlight::OpenInBackward(bool boundary, const std::function<double()>& multiplier,
                                    const ops::StepHyper& hyper) {
  if (!boundary || !plan::UpdatesDuringBackward(schedule_)) return;
  reduced_groups_.assign(optimizer_.group_count(), 0);
  first_final_group_ = static_cast<int>(reduced_groups_.size());
  optimizer_.BeginEarlyStep(multiplier(), hyper,
                            schedule_ == plan::UpdateSchedule::kSplit ? first_deferred_group_ : -1);
}

void UpdateInFlight::OnGroupReduced(int g) {
  if (!optimizer_.early_step_open()) return;
  reduced_groups_[static_cast<size_t>(g)] = 1;
  while (first_final_group_ > 0 && reduced_groups_[static_cast<size_t>(first_final_group_) - 1]) --first_final_group_;
  optimizer_.EarlyStepReady(first_final_group_);
}

void UpdateInFlight::OnBackwardFailed(const absl::Status& failure) {
  if (optimizer_.early_step_open())
    Fail("an earlier backward failed while the optimizer update was under way", failure);
}

void UpdateInFlight::AfterBackward(bool boundary) {
  // With a split update, the groups the next forward applies increments to.
  if (boundary && (schedule_ == plan::UpdateSchedule::kSplit || !optimizer_.early_step_open())) {
    optimizer_.PrefetchForStep(plan::UpdatesAtGather(schedule_));
  }
}

bool UpdateInFlight::RunStep(const std::function<double()>& multiplier, const ops::StepHyper& hyper) {
  if (optimizer_.early_step_open()) {
    // Begun by Backward with this step's multiplier and hyper-parameters; a
    // split update leaves the parameters' half to the next forward.
    optimizer_.FinishEarlyStep();
    return optimizer_.deferred_open();
  }
  if (plan::UpdatesAtGather(schedule_)) {
    // The swapped groups are updated where the next forward gathers them
    // (a split update whose backward did not open it: the whole update).
    const double m = multiplier();
    optimizer_.BeginDeferredStep(m, hyper, first_deferred_group_);
    return optimizer_.deferred_open();
  }
  const double m = multiplier();
  optimizer_.Step(m, hyper);
  return false;
}

void UpdateInFlight::AfterStepGather(bool pending) {
  if (pending) coordinator_->OnDeferredStepBegun();
}

void UpdateInFlight::Finish() {
  // Also when the forward finished the update: a persistent chunk of a unit
  // it skipped still has to be gathered again (the coordinator knows which;
  // every rank the same ones).
  if (!plan::UpdatesAtGather(schedule_)) return;
  try {
    optimizer_.FinishDeferredStep();
    coordinator_->RefreshStale();
  } catch (const Error& e) {
    Fail("the optimizer update applied at the forward's gathers failed", e.status());
    throw;
  }
}

absl::Status UpdateInFlight::FinishStatus() {
  if (!status_.ok()) return status_;
  try {
    Finish();
  } catch (const Error& e) {
    return e.status();
  }
  return absl::OkStatus();
}

}  // namespace zt
