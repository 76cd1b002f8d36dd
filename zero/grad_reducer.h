// GradReducer: averages gradients across data-parallel ranks, group by group.
//
//  stage 0: all-reduce each group's full flat gradient buffer;
//  stage 1: at the accumulation boundary, reduce-scatter each group's full
//           buffer so this rank holds the average of its shard;
//  stage 2: on every backward, copy gradients into a per-group bucket as
//           autograd produces them, free the parameter's .grad, and
//           reduce-scatter the bucket into this rank's accumulated shard;
//  stage 3: as stage 2, with the groups being the units' trainable chunks.
//
// With overlap_comm a group is launched from an autograd post-hook the moment
// its last gradient is accumulated, while backward keeps running. At stages
// 0-1 groups are launched in index order (a later group that finishes early
// waits for its predecessors), so every rank issues the same collectives in
// the same order no matter how autograd schedules work. At stages 2 and 3 a
// group is launched as soon as it completes, with or without overlap_comm
// (without it the hook also waits for it), so that its bucket is freed at
// once: the order is autograd's, which is the same on every rank for the
// same graph (stage 3's parameter gathers, which interleave with it, follow
// it too; a rank whose graph differs is a named error at the collective's
// label check, never a mismatched reduction); the on_group_complete callback
// tells the coordinator. At most max_inflight_groups buckets are then in
// flight besides those filling. Parameters that received no gradient count
// as zero: their groups are launched, in index order, when backward ends.
//
// A parameter's gradient normally arrives once per backward. Activation
// checkpointing can deliver it in several parts (one per checkpointed call
// that uses it); stages 0/1 without overlap_comm sum them in place before
// reducing, while stage 2/3 and overlap_comm, which reduce at the first part,
// throw zt::Error naming the parameter rather than lose the rest.
//
// Scaling follows DeepSpeed: with prescale_gradients the buffer is divided by
// the world size before the sum; otherwise it is divided by
// gradient_predivide_factor before and multiplied by factor / world after.
// With hierarchical sharding (GradReducerOptions::replica) the shard
// group's reduce-scatter is followed by an all-reduce of the shard across
// the replicas, and "world" is every rank of both.
//
// The groups must have the gradient residency of the stage
// (zero/flat_group.h): GradResidency::kFullFlat at stage 0,
// kFullFlatOwnedSlice at stage 1, kShardOnly at stages 2 and 3.
//
// Threading: BeginBackward/FinishBackward/ZeroGrads run on the training
// thread; hooks run on autograd's thread; mu_ orders them (the annotations
// below are checked by clang's -Wthread-safety, scripts/thread_safety.sh).
// Lock order: a hook's HookState::mu, then mu_, then whatever
// on_group_complete takes (the stage-3 coordinator's lock).
#pragma once

#include <ATen/core/Tensor.h>

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "comm/process_group.h"
#include "ops/quantize.h"
#include "zero/flat_group.h"
#include "zero/quantized_gradients.h"
#include "zero/scratch_pool.h"

namespace zt::zero {

struct GradReducerOptions {
  // GradResidencyFor(sharding) decides how to reduce; every group must have
  // that residency (checked at construction).
  plan::StageSharding sharding;
  bool overlap_comm = false;
  bool prescale_gradients = false;
  double gradient_predivide_factor = 1.0;
  std::optional<at::ScalarType> comm_dtype;  // nullopt: the gradients' dtype
  int max_inflight_groups = 2;               // stages 2/3: bounds bucket memory
  // Stage 2: the bucket reduced before finishes before the next one is
  // launched, so one bucket is in flight while the next fills (DeepSpeed's
  // two IPG buffers).
  bool wait_before_launch = false;
  // Stage 3: called (under the reducer's lock, on autograd's thread) when
  // every gradient of a group has been copied into its bucket. It must not
  // call back into the reducer.
  std::function<void(int group)> on_group_complete;
  // Stages 2/3: called (under the reducer's lock, on autograd's thread or
  // in FinishBackward) once a group's reduced gradient shard holds this
  // backward's final values (post-scaling applied). It must not call back
  // into the reducer.
  std::function<void(int group)> on_group_reduced;
  // Names of the parameters (same order), for error messages.
  std::vector<std::string> param_names;
  // Hierarchical sharding (comm/shard_groups.h): the ranks holding the same
  // shard. Stages 1-3 then reduce-scatter over `pg` (the shard group) and, at
  // the accumulation boundary (BeginBackward's `reduce`), all-reduce the
  // accumulated shard over these ranks, so the average is over
  // pg->size() * replica->size() ranks. Null: `pg` is the whole world.
  std::shared_ptr<comm::ProcessGroup> replica;
  // ZeRO++ qgZ (zero/quantized_gradients.h), buckets (stages 2/3; the
  // config allows stage 3, as DeepSpeed): each bucket is
  // reduced over `pg` by one all-to-all of quantized slices, summed in fp32
  // (comm_dtype does not apply; the replicas' all-reduce stays exact).
  // nullopt: exact reduce-scatter.
  std::optional<ops::QuantFormat> quantized_gradients;
  // LoCo error feedback for qgZ (zeropp_loco_param); needs quantized_gradients.
  std::optional<ErrorFeedbackOptions> error_feedback;
};

class GradReducer {
 public:
  // `groups` are the flat parameter groups (kept by reference: the caller
  // never resizes them); `pg` is the data-parallel process group.
  GradReducer(std::vector<FlatGroup>& groups, std::vector<at::Tensor> params, std::shared_ptr<comm::ProcessGroup> pg,
              GradReducerOptions options);
  ~GradReducer();
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  // Call before running backward. `reduce`: whether this backward ends the
  // accumulation (stages 0/1 reduce only then; stages 2/3 reduce inside the
  // shard group on every backward, across replicas only then).
  void BeginBackward(bool reduce) ABSL_LOCKS_EXCLUDED(mu_);
  // Call after backward returned: launches the groups the hooks did not,
  // waits for all, applies post-scaling. Throws zt::Error naming the
  // parameter group on a communication failure.
  void FinishBackward() ABSL_LOCKS_EXCLUDED(mu_);
  // Clears gradient storage after an optimizer step (or a skipped one), and
  // forgets a gradient that arrived outside a backward (below). Groups from
  // `first_kept` on keep their stage-2/3 gradient shards as they are (an
  // update still to read them: the update at gather); the next reduction
  // overwrites them all the same, as it does a zeroed shard.
  void ZeroGrads(int first_kept = -1) ABSL_LOCKS_EXCLUDED(mu_);

  // The name of the first parameter whose gradient arrived while no
  // BeginBackward/FinishBackward was open (a plain loss.backward() that
  // bypassed the engine, so nothing was averaged across ranks), or nullopt.
  // At stages 0/1 such a gradient lands in the flat buffer like any other,
  // so this is the only trace of the misuse.
  std::optional<std::string> GradientOutsideBackward() const ABSL_LOCKS_EXCLUDED(mu_);

  // Reduction scratch held across steps (stage-2 buckets, reduce-scatter
  // outputs, casts): the most that was ever in use at once.
  int64_t peak_bucket_bytes() const ABSL_LOCKS_EXCLUDED(mu_);

  // LoCo's error buffers (GradReducerOptions::error_feedback): the loss
  // scale changed by `factor` / an overflow made them non-finite. Call
  // between backwards.
  void ScaleErrorFeedback(double factor) ABSL_LOCKS_EXCLUDED(mu_);
  void ClearErrorFeedback() ABSL_LOCKS_EXCLUDED(mu_);
  // Bytes the error buffers hold (kept across steps).
  int64_t error_feedback_bytes() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Every rank the average is over: the shard group's, times the replicas'.
  int WorldSize() const { return pg_->size() * (options_.replica ? options_.replica->size() : 1); }
  // How the gradients are reduced, fixed at construction from the groups'
  // GradResidency: all-reduced in their full flat buffers (stage 0),
  // reduce-scattered from the full buffers into the owned slice (stage 1),
  // or copied into per-group buckets and reduce-scattered into the shards on
  // every backward (stages 2 and 3).
  enum class Reduction { kAllReduce, kScatterToSlice, kBucketsToShards };
  Reduction reduction_ = Reduction::kAllReduce;
  bool buckets() const { return reduction_ == Reduction::kBucketsToShards; }
  // Where the reducer is between BeginBackward and FinishBackward.
  enum class Phase {
    kIdle,          // outside BeginBackward/FinishBackward: gradients stay where autograd puts them
    kAccumulating,  // stages 0/1 before the accumulation boundary: gradients accumulate, no reduction
    kReducing,      // this backward's gradients are reduced (stages 2/3 always)
  };
  // One per flat parameter group, reset by BeginBackward unless noted.
  struct GroupState {
    int pending = 0;              // parameters whose gradient has not arrived yet
    bool complete = false;        // every gradient arrived (FinishBackward: or never will)
    bool launched = false;        // its collective was issued
    at::Tensor bucket;            // stages 2/3: flat copy of the gradients (scratch) until reduced
    bool shard_has_data = false;  // stages 2/3: grad_shard holds earlier micro-steps (reset by ZeroGrads)
    ErrorFeedback feedback;       // qgZ with LoCo: kept across steps, made at the first reduction
  };
  // One per parameter.
  struct ParamState {
    int group = -1;      // its flat group; -1: not trained (fixed at construction)
    int slot = -1;       // its slot in the group's layout (fixed at construction)
    bool ready = false;  // its gradient arrived in this backward
  };
  struct InFlight {
    int group = 0;
    std::unique_ptr<comm::Work> work;
    at::Tensor input;   // what was sent (may be a temporary)
    at::Tensor output;  // where the reduced values landed
    // qgZ: the all-to-all's quantized slices (scratch); `input` is the fp32
    // bucket whose own slice joins the sum.
    at::Tensor wire_send;
    at::Tensor wire_recv;
  };
  struct HookState;
  class PostHook;

  void OnGradReady(int param_index) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for every all-reduce across replicas, then reports those groups
  // reduced (on_group_reduced). Throws zt::Error naming the group on failure.
  void FinishAcrossReplicasLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // options_.param_names[param_index], or "#<index>" where names were not given.
  std::string ParamName(int param_index) const;
  void LaunchReadyLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LaunchLocked(int group_index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinalizeOldestLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  at::Tensor EnsureBucketLocked(int group_index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  // The reducer touches the groups' tensors and the parameters' .grad only
  // under mu_; the engine uses them between backwards, when no hook runs.
  std::vector<FlatGroup>& groups_ ABSL_GUARDED_BY(mu_);
  std::vector<at::Tensor> params_ ABSL_GUARDED_BY(mu_);
  // Fixed at construction, read without the lock.
  const std::shared_ptr<comm::ProcessGroup> pg_;
  const GradReducerOptions options_;
  const std::shared_ptr<HookState> hook_state_;
  std::vector<std::shared_ptr<void>> accumulators_;  // keeps hooked AccumulateGrad nodes alive

  Phase phase_ ABSL_GUARDED_BY(mu_) = Phase::kIdle;
  bool boundary_ ABSL_GUARDED_BY(mu_) = true;                 // this backward ends the accumulation
  int outside_backward_param_ ABSL_GUARDED_BY(mu_) = -1;      // see GradientOutsideBackward
  std::vector<ParamState> param_state_ ABSL_GUARDED_BY(mu_);  // per parameter (params_ order)
  std::vector<GroupState> group_state_ ABSL_GUARDED_BY(mu_);  // per flat group (groups_ order)
  int next_launch_ ABSL_GUARDED_BY(mu_) = 0;                  // stages 0-2: next group to launch in order
  std::deque<InFlight> inflight_ ABSL_GUARDED_BY(mu_);
  // Hierarchical sharding: reduced shards being all-reduced across replicas
  // (launched as each shard-group reduction lands, waited for in
  // FinishBackward, in launch order).
  std::deque<InFlight> across_inflight_ ABSL_GUARDED_BY(mu_);
  // Buckets and casts (bucket-sized) apart from reduce-scatter outputs
  // (shard-sized): a pool hands a free buffer out for any size and grows
  // it, so one pool for both would grow output buffers to bucket size.
  ScratchPool scratch_ ABSL_GUARDED_BY(mu_);
  ScratchPool shard_scratch_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zt::zero
