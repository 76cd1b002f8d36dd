#include "plan/update_schedule.h"

namespace zt::plan {

namespace {

// The update during backward needs each group's final gradient as it is
// reduced: no global norm to clip by, no fp16 overflow to agree on first.
bool MayUpdateInBackward(const UpdateScheduleFacts& f) {
  return f.allow_during_backward && f.sharding.parameters() && !f.gradient_clipping && !f.fp16;
}

}  // namespace

UpdateSchedule ChooseUpdateSchedule(const UpdateScheduleFacts& f) {
  const bool in_backward = MayUpdateInBackward(f);
  // Swapped parameters would be read inside backward, competing with its
  // own gathers for the swap buffers: measured no faster, so not then.
  if (in_backward && f.state_walks_ahead && !f.params_swapped) return UpdateSchedule::kDuringBackward;
  // The update at gather: the parameters must be their own master (the
  // increment goes straight into the swapped shard), and some swapped
  // group must be able to wait (the coordinator says which).
  const bool at_gather = f.allow_at_gather && f.sharding.parameters() && f.params_swapped && f.master_is_params &&
                         f.first_deferrable_group < f.group_count;
  if (!at_gather) return UpdateSchedule::kInStep;
  if (in_backward && f.state_walks_ahead && f.optimizer_splits && f.fp32_grads) return UpdateSchedule::kSplit;
  return UpdateSchedule::kAtGather;
}

std::string InStepReason(const UpdateScheduleFacts& f) {
  if (!f.sharding.parameters())
    return "it needs ZeRO stage 3, where each group's gradients are final as backward reduces them";
  if (f.gradient_clipping) return "gradient_clipping needs the global gradient norm first";
  if (f.fp16) return "fp16 needs every rank's overflow check first";
  return "with the parameter shards on NVMe too it would read them inside backward, competing with backward's "
         "gathers";
}

std::string DescribeUpdateSchedule(UpdateSchedule schedule) {
  switch (schedule) {
    case UpdateSchedule::kInStep: return "";
    case UpdateSchedule::kDuringBackward:
      return "the optimizer update of each sub-group runs during backward, once its gradients are reduced (its walks "
             "all go down, so more sub-groups move per step than said above, behind backward)";
    case UpdateSchedule::kAtGather:
      return "the optimizer update of each swapped parameter shard runs where the next forward gathers it, so the "
             "shard is read once for both and the swap I/O overlaps the forward (its walks all go up, so more "
             "optimizer sub-groups may move per step than said above)";
    case UpdateSchedule::kSplit:
      return "the optimizer update is split: each sub-group's optimizer state is updated during backward, once its "
             "gradients are reduced (its walks all go down, so more sub-groups move per step than said above, behind "
             "backward), and the step's increment of each swapped parameter shard is added where the next forward "
             "gathers it, so the shard is read once for both and written back behind the forward";
  }
  return "";
}

const char* UpdateScheduleName(UpdateSchedule schedule) {
  switch (schedule) {
    case UpdateSchedule::kInStep: return "in step";
    case UpdateSchedule::kDuringBackward: return "during backward";
    case UpdateSchedule::kAtGather: return "at gather";
    case UpdateSchedule::kSplit: return "split";
  }
  return "?";
}

}  // namespace zt::plan
