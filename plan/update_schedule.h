// When the optimizer update runs: the schedule and the pure rule that
// chooses it, once, at setup. No LibTorch; engine/update_in_flight.h runs
// the schedule it returns.
//
// The update normally runs in Engine::Step. With the optimizer state on NVMe
// at stage 3, it can instead run where its swap I/O overlaps compute:
//  * during backward: each sub-group is updated as soon as its gradients
//    are reduced (needs each gradient final when reduced: no clipping by the
//    global norm, no fp16 overflow check, and the parameters not swapped,
//    whose reads would compete with backward's gathers);
//  * at gather: with the parameter shards on NVMe and fp32 parameters (their
//    own master), the update of each swapped shard waits for the next
//    forward's gather of it, so the shard is read once for both;
//  * split: both at once where the optimizer's state update reads no
//    parameter (AdamW, Lion) and the gradients are fp32: the state's half
//    during backward, the parameters' half (the increment) at gather.
// Every schedule gives the update in the step's values bit for bit.
#pragma once

#include <string>

#include "plan/stage_sharding.h"

namespace zt::plan {

enum class UpdateSchedule {
  kInStep,          // the whole update in Engine::Step
  kDuringBackward,  // each sub-group during the boundary backward
  kAtGather,        // the swapped groups where the next forward gathers them
  kSplit,           // the state during backward, the parameters at gather
};

// What the choice depends on, gathered by the engine from the config and
// from what setup built.
struct UpdateScheduleFacts {
  StageSharding sharding;          // the config's ZeRO stage
  bool gradient_clipping = false;  // gradient_clipping > 0: the global norm comes first
  bool fp16 = false;               // fp16's overflow check comes first
  // The optimizer state is on NVMe and can be walked ahead of the update
  // (the swapper reads sub-groups before they are needed).
  bool state_walks_ahead = false;
  bool params_swapped = false;     // stage-3 parameter shards on NVMe
  bool master_is_params = false;   // fp32 parameters, updated in place
  bool optimizer_splits = false;   // the state update reads no parameter (AdamW, Lion)
  bool fp32_grads = false;         // the increment can take the gradient's place
  int first_deferrable_group = 0;  // the first group whose update may wait for a gather
  int group_count = 0;             // trainable flat groups
  // Tuning (tests and benchmarks compare against the update in the step).
  bool allow_during_backward = true;
  bool allow_at_gather = true;
};

UpdateSchedule ChooseUpdateSchedule(const UpdateScheduleFacts& facts);

// Whether the schedule updates during backward / at gather.
inline bool UpdatesDuringBackward(UpdateSchedule s) {
  return s == UpdateSchedule::kDuringBackward || s == UpdateSchedule::kSplit;
}
inline bool UpdatesAtGather(UpdateSchedule s) { return s == UpdateSchedule::kAtGather || s == UpdateSchedule::kSplit; }

// For kInStep where the update during backward was allowed: why it could
// not run then, as the end of a sentence for the start-up notes.
std::string InStepReason(const UpdateScheduleFacts& facts);

// One sentence for the offload summary (empty for kInStep).
std::string DescribeUpdateSchedule(UpdateSchedule schedule);
const char* UpdateScheduleName(UpdateSchedule schedule);

}  // namespace zt::plan
