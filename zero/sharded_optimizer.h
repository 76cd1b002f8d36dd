// ShardedOptimizer: fp32 master weights and optimizer state for the elements
// this rank owns (its shard of every group at stages 1-3, everything at
// stage 0), and the update that writes them back into the model's buffers.
//
// With an fp32 model the master weights are the owned parameters themselves
// (no copy): the optimizer updates them in place. With bf16/fp16 models they
// are an fp32 copy of the owned shard, and the step writes the rounded
// result into the owned parameters in the same pass (ops::StepExtras), with
// 1 / loss scale and the clipping coefficient folded into the gradient read.
//
// Where the state lives (zero/optimizer_state.h): in host memory (no
// offload, or offload_optimizer.device "cpu"), or on NVMe, visited one
// sub-group at a time through a bounded buffer pool ("nvme"). Where the
// owned parameters live: in their groups, or, under stage-3 parameter
// offload, behind a ParamShardAccess that swaps them in for the update.
//
// Optimizer param groups (config/param_groups.h) cut across the flat
// groups: a flat group holds whole parameters of several param groups (a
// stage-3 unit's weights and biases), so each flat group's owned range is a
// table of runs, each one param group's, and every update is applied run by
// run with that group's optimizer and lr. Padding belongs to a neighbouring
// run (it is zero and stays zero under every optimizer).
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config.h"
#include "config/param_groups.h"
#include "offload/optimizer_swapper.h"
#include "ops/shard_optimizer.h"
#include "zero/flat_group.h"
#include "zero/optimizer_state.h"
#include "zero/param_shard_access.h"

namespace zt::zero {

struct ShardedOptimizerOptions {
  ops::Impl impl = ops::Impl::kFast;
  // Set: keep the state on NVMe (nvme_path, sub_group_size, buffers,
  // pipelining) through `io`. Unset: in host memory.
  std::optional<offload::OptimizerSwapOptions> swap;
  offload::IoEngine* io = nullptr;
  // Stage-3 parameter offload; nullptr: the groups' OwnedParams().
  ParamShardAccess* params = nullptr;
  // EarlyStepReady waits for the reads of the sub-groups it may update
  // (EngineTuning::update_during_backward_waits) rather than updating only
  // what has arrived.
  bool early_step_waits = false;
};

class ShardedOptimizer {
 public:
  // Builds the state (reserving swap files at "nvme"), copies the owned
  // parameters into the fp32 master where it is a copy. Errors: the config's
  // (InvalidArgument naming the key) or the swap files' (missing directory,
  // no room, too few buffers).
  static absl::StatusOr<std::unique_ptr<ShardedOptimizer>> Create(std::vector<FlatGroup>& groups,
                                                                  const OptimizerConfig& config,
                                                                  ShardedOptimizerOptions options = {});
  // With optimizer param groups: `param_groups.group_of` is indexed by the
  // slots' param_index (the trainable parameters in model order). Every
  // group's optimizer must be of one type (they share the state's kinds).
  static absl::StatusOr<std::unique_ptr<ShardedOptimizer>> Create(std::vector<FlatGroup>& groups,
                                                                  const ResolvedParamGroups& param_groups,
                                                                  ShardedOptimizerOptions options = {});

  // Sum of squares of this rank's owned gradients, accumulated in double.
  double LocalGradSquaredNorm() const;
  // True if any owned gradient is inf or nan.
  bool LocalHasNonFinite() const;

  // master <- optimizer(master, grads * grad_multiplier); owned params <- master.
  // Throws zt::Error when swapping fails (the message names the file).
  void Step(double grad_multiplier, const ops::StepHyper& hyper);
  // Swapped parameters (ParamShardAccess): starts reading the shards the
  // next Step updates first, in its order, as far as the swap pool has room
  // (called when backward ends, so the reads overlap what comes before the
  // step); with `deferred`, those the update at gather (below) needs
  // first, from group 0 up. Nothing otherwise. Never blocks.
  void PrefetchForStep(bool deferred = false);

  // The same update run while backward still produces gradients (state on
  // NVMe, parameters not swapped: CanUpdateEarly), so that the swap I/O
  // overlaps backward's compute. With swapped parameter shards the update
  // would read them inside backward, competing with backward's own gathers
  // for the parameter buffers: measured no faster, so it stays in the step.
  // BeginEarlyStep opens the update and starts reading what it needs;
  // EarlyStepReady(k), once the gradients of groups k..G-1 are final,
  // updates what it can without waiting for I/O (or, with
  // early_step_waits, all of it, waiting for its reads; errors are kept for
  // FinishEarlyStep); FinishEarlyStep updates the rest and throws zt::Error
  // as Step does. The result equals Step's bit for bit. The parameters of
  // the group last updated stay acquired between calls (they are not
  // swapped, so that holds nothing back).
  //
  // With `first_deferred` >= 0 (CanSplitUpdate: swapped parameter shards,
  // fp32 parameters, fp32 gradients and an optimizer whose state update does
  // not read the parameters), the early step is the first half of a split
  // update: backward's walk updates the optimizer state from each gradient
  // shard and leaves the step's increment in its place
  // (ShardOptimizer::StepMoments), touching no parameter shard, and
  // FinishEarlyStep opens the update at gather (below) for the second half,
  // which only adds the increments to the parameters of the groups from
  // `first_deferred` on as the next forward gathers them (those below are
  // done in FinishEarlyStep). The result equals Step's bit for bit.
  // The facts plan::ChooseUpdateSchedule decides from: the state on NVMe
  // can be walked ahead, the parameters are swapped (a ParamShardAccess),
  // the optimizer's state update reads no parameter, every gradient is fp32.
  bool state_walks_ahead() const { return state_->CanWalkAhead(); }
  bool params_swapped() const { return options_.params != nullptr; }
  bool splits_update() const { return opts_[0]->SplitsUpdate(); }
  bool fp32_grads() const;
  void BeginEarlyStep(double grad_multiplier, const ops::StepHyper& hyper, int first_deferred = -1);
  void EarlyStepReady(int first_final_group);
  void FinishEarlyStep();
  bool early_step_open() const { return early_.open; }
  int group_count() const { return static_cast<int>(groups_.size()); }
  // Elements updated so far, how many of them while backward ran
  // (EarlyStepReady), and how many ahead of a forward's gather
  // (UpdateThrough).
  int64_t elements_updated() const { return elements_updated_; }
  int64_t elements_updated_in_backward() const { return elements_in_backward_; }
  int64_t elements_updated_at_gather() const { return elements_at_gather_; }

  // The update at gather (stage-3 parameter shards on NVMe and fp32
  // parameters, which are their own master: CanDeferUpdate). Step's update
  // of the groups from `first_deferred` on waits for the next forward and
  // is applied to each group just before that forward gathers it, so the
  // shard is read once for both (not once more in the step) and written
  // back behind the forward, and the optimizer state's I/O overlaps the
  // forward's compute. BeginDeferredStep updates the groups below
  // `first_deferred` now (the walk goes up from group 0) and leaves the
  // rest pending; UpdateThrough(g) updates every group through g, waiting
  // for the I/O it needs; FinishDeferredStep updates all that are left.
  // The result equals Step's bit for bit. The gradients of a pending group
  // must stay as they are until it is updated (g < updated_groups()).
  // Errors throw zt::Error as Step does; the update then stays failed and
  // every later call throws it again (the state is partly updated).
  void BeginDeferredStep(double grad_multiplier, const ops::StepHyper& hyper, int first_deferred);
  void UpdateThrough(int g) { AdvanceDeferred(g, /*at_gather=*/true); }
  void FinishDeferredStep() { AdvanceDeferred(static_cast<int>(groups_.size()) - 1, /*at_gather=*/false); }
  bool deferred_open() const { return deferred_.open; }
  // Groups [0, updated_groups()) hold their values after the last Step:
  // all of them unless a deferred update is open.
  int updated_groups() const { return deferred_.open ? deferred_next_ : static_cast<int>(groups_.size()); }

  // Replaces the param groups (a resume adopting a checkpoint's): the
  // state is per element and stays; only which settings update which
  // elements changes. Same optimizer type; not while an update is open.
  // InvalidArgument naming the group for settings the optimizer refuses.
  absl::Status SetParamGroups(const ResolvedParamGroups& param_groups);

  // Re-reads the owned parameters into the fp32 master copies, after the
  // parameters were written directly (GatheredParameters with a modifier).
  void RefreshMaster();

  // Checkpoint support. kinds(): "master" (when the store holds a copy) and
  // the optimizer's state names; state_names(): the latter only.
  const std::vector<std::string>& kinds() const { return state_->kinds(); }
  std::vector<std::string> state_names() const;
  // True when the owned fp32 parameters are the master (nothing stored).
  bool master_is_params() const { return master_is_params_; }
  int64_t step_count() const { return step_; }
  // Elements [b, e) of group g's owned range of `kind` ("master" included,
  // read from the parameters where they are the master).
  absl::Status Read(const std::string& kind, int g, int64_t b, int64_t e, float* dst);
  // Where `kind` of group g lies in host memory, or nullptr (swapped, or
  // the master that is the parameters).
  const float* Resident(const std::string& kind, int g) const;
  // Loading: a fresh empty store shaped and placed like this one (a second
  // set of swap files at "nvme"), filled by the caller, then adopted with
  // the masters (one fp32 tensor per group's owned range, used where the
  // master is the parameters) and the step count. Adopt writes the new
  // masters into the owned parameters.
  absl::StatusOr<std::unique_ptr<OptimizerState>> MakeStaging() const;
  void Adopt(std::unique_ptr<OptimizerState> staged, const std::vector<at::Tensor>& masters, int64_t step);
  // LoadWeights: new master values (one fp32 tensor per group), state kept.
  void SetMasters(const std::vector<at::Tensor>& masters);

  int64_t master_bytes() const;  // resident bytes; 0 where the master is the parameters or on disk
  int64_t state_bytes() const;   // resident bytes of the optimizer state
  int64_t disk_bytes() const { return state_->disk_bytes(); }
  int64_t buffer_bytes() const { return state_->buffer_bytes(); }
  std::string Describe() const { return state_->Describe(); }
  int sub_groups_moved_per_step() const { return state_->sub_groups_moved_per_step(); }
  offload::OptimizerSwapper::Stats swap_stats() const { return state_->swap_stats(); }

 private:
  // What each kind of update needs (checked when it opens; the engine's
  // schedule only opens what these allow).
  bool CanUpdateEarly() const { return state_walks_ahead() && !params_swapped(); }
  bool CanDeferUpdate() const { return params_swapped() && master_is_params_; }
  bool CanSplitUpdate() const { return CanDeferUpdate() && state_walks_ahead() && splits_update() && fp32_grads(); }
  ShardedOptimizer(std::vector<FlatGroup>& groups, ShardedOptimizerOptions options)
      : groups_(groups), options_(std::move(options)) {}
  at::Tensor AcquireParams(int g, bool read);
  void ReleaseParams(int g, bool dirty);
  // Prefetch hints for groups g, g + direction, ... until the pool is full.
  void PrefetchParamsFrom(int g, int direction);
  // owned params <- master (rounded), group by group.
  void WriteBackParams();
  // One piece of an update (Step, the early or the deferred step): group
  // g's elements [b, e) with their state at data[kind]. Pieces of one group
  // come consecutively: its parameters stay acquired until the walk moves
  // on. A split update's first half (u.split) acquires no parameters.
  struct Update {
    bool open = false;
    double grad_multiplier = 1.0;
    ops::StepHyper hyper;
    int direction = 1;  // the walk's: +1 from the first group up, -1 down
    int current = -1;   // the group whose parameters are acquired, -1: none
    at::Tensor owned;
    int64_t step_after = 0;
    absl::Status error;        // the early or deferred step's first failure
    bool in_backward = false;  // inside EarlyStepReady
    bool at_gather = false;    // the update at gather
    // A split update (CanSplitUpdate): the early step's pieces update only
    // the state and leave the increment in the gradient shard; the deferred
    // update only applies the increments (no state walk).
    bool split = false;
    int first_deferred = 0;  // the split early step's: where its second half starts
  };
  absl::Status UpdatePiece(Update& u, int g, int64_t b, int64_t e, float* const* data);
  // A stretch of a flat group's owned range that one param group updates,
  // as offsets into the owned range.
  struct Run {
    int64_t begin = 0;
    int64_t end = 0;
    int param_group = 0;
  };
  void BuildRuns(const std::vector<int>& group_of);
  // The step's hyper-parameters for param group k (its own lr, if any).
  ops::StepHyper HyperFor(int k, const ops::StepHyper& hyper) const;
  // The deferred update through group g; `at_gather`: for a forward's
  // gather (counted in elements_updated_at_gather).
  void AdvanceDeferred(int g, bool at_gather);
  // The split update's second half for groups [deferred_next_, bound).
  void ApplyIncrements(int bound, bool at_gather);
  // Releases the parameters the update holds and closes it.
  void CloseUpdate(Update& u);
  Update early_;
  Update deferred_;
  int deferred_next_ = 0;  // the open deferred update's groups below this are done
  int64_t elements_updated_ = 0;
  int64_t elements_in_backward_ = 0;
  int64_t elements_at_gather_ = 0;

  std::vector<FlatGroup>& groups_;
  ShardedOptimizerOptions options_;
  std::vector<std::unique_ptr<ops::ShardOptimizer>> opts_;  // one per param group
  std::vector<std::optional<double>> group_lr_;             // a param group's own constant lr
  std::vector<std::vector<Run>> runs_;                      // per flat group, ascending, covering its owned range
  std::unique_ptr<OptimizerState> state_;
  bool master_is_params_ = false;
  int master_kind_ = -1;  // index of "master" in kinds(), -1 when the parameters are the master
  int64_t step_ = 0;      // completed optimizer steps (ShardState::step)
};

}  // namespace zt::zero
