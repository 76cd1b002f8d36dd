// The implementation behind zt::Engine (engine/engine.h): training steps,
// accounting and logging here and in engine/engine.cc; setup in
// engine/engine_setup.cc; checkpoints delegated to engine/checkpointer.h.
// Internal to zt_engine: users include engine/engine.h.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/background_save.h"
#include "engine/engine.h"
#include "engine/engine_core.h"
#include "engine/engine_tuning.h"
#include "engine/update_in_flight.h"
#include "monitor/monitor.h"

namespace zt {

class EngineImpl final : public Engine {
 public:
  EngineImpl() = default;
  ~EngineImpl() override;

  // Fills the core (engine/engine_setup.cc): validates the config against
  // the world, builds the flat groups of stages 0-2 or the units and chunks
  // of stage 3, then the optimizer, reducer, scheduler and loss scaler.
  absl::Status Init(std::shared_ptr<torch::nn::Module> model, Config config, std::shared_ptr<comm::ProcessGroup> pg,
                    EngineOptions options, EngineTuning tuning);

  // engine/engine.h
  torch::nn::Module& module() override { return *core_.module; }
  const Config& config() const override { return core_.config; }
  comm::ProcessGroup& process_group() override { return *core_.pg; }
  void Backward(const at::Tensor& loss) override;
  void Step() override;
  double TrainBatch(const std::function<at::Tensor(int64_t micro_step)>& micro_loss) override;
  bool IsAccumulationBoundary() const override;
  int64_t global_steps() const override { return core_.global_steps; }
  int64_t global_samples() const override { return core_.global_samples; }
  int64_t skipped_steps() const override { return core_.skipped_steps; }
  int64_t micro_steps() const override { return core_.micro_steps; }
  double lr() const override;
  double loss_scale() const override { return core_.scaler.scale(); }
  std::optional<double> last_grad_norm() const override { return last_grad_norm_; }
  ModelStateBytes memory() const override;
  const std::vector<std::string>& param_names() const override { return core_.param_names; }
  const ResolvedParamGroups& param_groups() const override { return core_.param_groups; }
  absl::Status SaveCheckpoint(const std::string& dir, const std::string& tag, const ckpt::Value& client_state) override;
  absl::Status WaitForPendingSave() override;
  absl::StatusOr<ckpt::Value> LoadCheckpoint(const std::string& dir, const std::string& tag) override;
  absl::Status LoadWeights(const std::string& path, const std::vector<std::string>& new_parameters) override;
  absl::Status ExportWeights(const std::string& path) override;
  std::string OffloadSummary() const override;
  std::vector<std::string> OffloadNotes() const override;
  OffloadStats offload_stats() const override;
  CommTraffic comm_traffic() const override;
  std::optional<zero::CoordinatorStats> stage3_stats() const override;
  void ResetGatheredPeak() override;
  void ReleaseCachedMemory() override;

  // For GatheredParameters (engine/engine.h).
  std::vector<int> ChunksOf(const std::vector<at::Tensor>& params) const override;
  void PinChunks(const std::vector<int>& chunks) override;
  void UnpinChunks(const std::vector<int>& chunks, std::optional<int> modifier_rank) override;

 private:
  // The parts setup fills differently per stage (engine/engine_setup.cc);
  // FinishSetup is the tail both share.
  struct SetupSummary;
  absl::Status SetupStages0To2(at::ScalarType dtype, SetupSummary* summary);
  absl::Status SetupStage3(at::ScalarType dtype, SetupSummary* summary);
  absl::Status FinishSetup(at::ScalarType dtype, const SetupSummary& summary);
  // core_.shard_pg, replica_pg and hpz_pg from mics_shard_size and
  // zero_hpz_partition_size (comm/shard_groups.h); collective, after the
  // ranks agreed on the config. Errors name the key.
  absl::Status SetupShardGroups();
  // core_.two_hop from mics_hierarchical_params_gather and the launch
  // layout (stage 3, after the coordinator exists); collective.
  absl::Status SetupTwoHopGather();
  // Offload: checks the config against this build, starts the I/O engine
  // for "nvme"; MakeOptimizer builds the sharded optimizer where the config
  // puts its state.
  absl::Status InitOffload();
  absl::Status OffloadParamShards();
  absl::Status MakeOptimizer();
  // core_.param_groups from EngineOptions::param_groups (named errors).
  absl::Status ResolveParamGroupsOf();
  zero::GradReducerOptions ReducerOptions() const;  // from the config
  absl::Status ConvertAndBroadcastBuffers(at::ScalarType dtype);

  void OptimizerStep();
  // The learning rate and momenta of the step about to be applied.
  ops::StepHyper StepHyperNow() const;
  // EngineOptions::retain_step_heap, once, at the first Backward.
  void RetainStepHeapOnce();
  bool heap_planned_ = false;
  uint64_t heap_trim_threshold_ = 0;
  // fp16: whether any rank saw a non-finite gradient (collective).
  bool AnyRankOverflowed();
  // The factor that unscales and clips the gradients (collective with clipping).
  double GradMultiplier();
  void MaybeLog();

  EngineCore core_;
  // checkpoint.async_save: the save being written, and the staging memory
  // it was copied into (kept from save to save).
  ckpt::SnapshotArena save_arena_;
  std::unique_ptr<BackgroundSave> pending_save_;
  // Commits the save in flight once every rank's writer is done (`wait`:
  // blocks until then). Collective; a no-op without a save in flight.
  absl::Status FinishPendingSave(bool wait);
  // Before the engine changes parameters, master weights or optimizer
  // state: waits until the save in flight has copied them.
  void WaitForStagedSave() {
    if (pending_save_) staged_wait_seconds_ += pending_save_->WaitUntilStaged();
  }
  double staged_wait_seconds_ = 0;  // summed over the run, for the log
  double staged_wait_at_save_ = 0;  // ... when the save in flight started
  // The optimizer update's schedule and the update under way; made with the
  // optimizer, destroyed before the core.
  std::unique_ptr<UpdateInFlight> update_;
  plan::UpdateScheduleFacts update_facts_;  // what setup chose the schedule from
  // Gathers the facts, chooses the schedule (plan::ChooseUpdateSchedule)
  // and makes update_ (after the optimizer and the coordinator exist).
  void MakeUpdateInFlight();
  std::optional<double> last_grad_norm_;
  // bf16 with fp32 arithmetic (EngineOptions::bf16_compute): alive as long
  // as the engine.
  std::optional<Fp32ComputeForBf16> fp32_compute_;

  // Logging and wall_clock_breakdown.
  // Detached running sum of this rank's micro-batch losses since the last
  // log line; read (one host sync) only when logging.
  at::Tensor window_loss_sum_;
  int64_t window_loss_count_ = 0;
  std::chrono::steady_clock::time_point log_window_start_;
  int64_t log_window_samples_ = 0;
  std::chrono::steady_clock::time_point last_event_;
  struct Timers {
    double forward = 0, backward = 0, reduce = 0, step = 0;
  } timers_;
  OffloadStats logged_offload_;  // offload_stats() at the last log line
  CommTraffic logged_comm_;      // comm_traffic() at the last log line

  // csv_monitor / tensorboard (rank 0; null when off): events of every
  // optimizer step, from this rank's losses of the step's micro-batches.
  std::unique_ptr<monitor::Monitor> monitors_;
  at::Tensor step_loss_sum_;
  int64_t step_loss_count_ = 0;
  void WriteMonitorEvents(double lr);
};

}  // namespace zt
