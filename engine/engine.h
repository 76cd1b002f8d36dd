// zt::Engine: data-parallel training with ZeRO stages 0-3, the C++
// counterpart of deepspeed.initialize(...).
//
//   auto pg = zt::ValueOrThrow(zt::comm::InitProcessGroup(env, {}));
//   auto engine = zt::ValueOrThrow(zt::Engine::Create(model, config, pg));
//   for (auto& batch : loader) {             // one micro-batch per iteration
//     auto loss = loss_fn(model->forward(batch.x), batch.y);
//     engine->Backward(loss);
//     engine->Step();                         // optimizer step at the boundary
//   }
//
// Contract:
//  * Every rank creates the engine with the same model architecture and
//    config, and calls Backward/Step the same number of times: they run
//    collectives that must match across ranks.
//  * Create broadcasts rank 0's parameters and buffers, converts the model to
//    bf16/fp16 when the config enables them, and re-points every trainable
//    parameter into a flat buffer (the Parameter objects stay the same).
//  * Stage 3 shards the parameters of every zt::Unit (zero/unit.h): they hold
//    data only while their unit runs forward or backward, or inside a
//    zt::GatheredParameters scope (engine/gathered_parameters.h). Every rank
//    must run the same units in the same order.
//  * Use Engine::Backward, not loss.backward(): it applies loss scaling and
//    gradient accumulation and drives the reduction.
//  * Backward and Step throw zt::Error on communication failures (a dead
//    peer, a timeout), on NVMe swap failures (naming the file and offset)
//    and on fp16 overflow at the minimum loss scale.
//  * Offload (zero_optimization.offload_optimizer / offload_param,
//    docs/offload.md): "nvme" keeps the fp32 master and optimizer state
//    (stages 1-3) and the parameter shards (stage 3) in swap files under
//    nvme_path, streamed through bounded buffer pools; "cpu" keeps them in
//    host memory, which on a CPU-only build is where they already are.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ckpt/value.h"
#include "comm/process_group.h"
#include "config/config.h"
#include "engine/loss_scaler.h"
#include "engine/lr_scheduler.h"
#include "ops/shard_optimizer.h"
#include "zero/param_coordinator.h"

namespace zt {

class GatheredParameters;

namespace offload {
class IoEngine;
}  // namespace offload

namespace zero {
struct FlatGroup;
struct GradReducerOptions;
class GradReducer;
class ShardedOptimizer;
struct CoordinatorLink;
}  // namespace zero

// Bytes of model state this rank holds (what the ZeRO formulas count).
struct ModelStateBytes {
  int64_t params = 0;           // flat parameter buffers (model dtype, padding included); stage 3:
                                // the shards, plus persistent chunks in full
  int64_t grads = 0;            // full flat gradients (stages 0/1) or the local shard (stages 2/3)
  int64_t master = 0;           // fp32 master copy (0 when it aliases fp32 parameters)
  int64_t optimizer_state = 0;  // exp_avg, exp_avg_sq, ...
  int64_t peak_buckets = 0;     // reduction scratch kept across steps (most ever in use at once)
  int64_t peak_gathered = 0;    // stage 3: most gathered (non-persistent) parameter bytes at once
  int64_t gather_cache = 0;     // stage 3: idle gather buffers kept for reuse (<= peak_gathered)
  int64_t nvme = 0;             // NVMe offload: optimizer state and parameter shards in swap files
                                // (not in memory, so not in the fields above)
  int64_t swap_buffers = 0;     // NVMe offload: host buffers of the swap pools (fixed by the config)
  // Model states in host memory (the ZeRO papers' per-rank figure).
  int64_t model_states() const { return params + grads + master + optimizer_state; }
};

// NVMe offload traffic since Engine::Create (zeros without it).
struct OffloadStats {
  uint64_t optimizer_read_bytes = 0;
  uint64_t optimizer_written_bytes = 0;
  double optimizer_wait_seconds = 0;  // the step blocked on swap I/O (not overlapped)
  uint64_t param_read_bytes = 0;
  uint64_t param_written_bytes = 0;
  uint64_t param_reads_ahead = 0;  // shard reads started ahead of their gather
  uint64_t param_hits = 0;         // shards already resident (or in flight) when needed
  double param_wait_seconds = 0;
};

struct EngineOptions {
  // Implementation of the optimizer kernels (the reference path is for tests).
  ops::Impl optimizer_impl = ops::Impl::kFast;
};

class Engine {
 public:
  static absl::StatusOr<std::unique_ptr<Engine>> Create(std::shared_ptr<torch::nn::Module> model, Config config,
                                                        std::shared_ptr<comm::ProcessGroup> group,
                                                        EngineOptions options = {});
  template <typename ModuleType>
  static absl::StatusOr<std::unique_ptr<Engine>> Create(torch::nn::ModuleHolder<ModuleType> model, Config config,
                                                        std::shared_ptr<comm::ProcessGroup> group,
                                                        EngineOptions options = {}) {
    return Create(model.ptr(), std::move(config), std::move(group), options);
  }

  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  torch::nn::Module& module() { return *module_; }
  const Config& config() const { return config_; }
  comm::ProcessGroup& process_group() { return *pg_; }

  // Runs backward on `loss` (a scalar from this rank's micro-batch) with the
  // loss scale and 1/gradient_accumulation_steps applied.
  void Backward(const at::Tensor& loss);
  // At the accumulation boundary: reduces what is left, checks overflow,
  // clips, steps the optimizer and scheduler, gathers updated parameters.
  // Elsewhere it only advances the micro-step counter.
  void Step();
  // Runs gradient_accumulation_steps micro-steps: loss = micro_loss(i),
  // Backward, Step. Returns the mean loss of this rank's micro-batches.
  double TrainBatch(const std::function<at::Tensor(int64_t micro_step)>& micro_loss);

  // True when the next Step() is an optimizer step.
  bool IsAccumulationBoundary() const;
  int64_t global_steps() const { return global_steps_; }  // optimizer steps incl. skipped
  int64_t global_samples() const { return global_samples_; }
  int64_t skipped_steps() const { return skipped_steps_; }
  int64_t micro_steps() const { return micro_steps_; }
  double lr() const;  // lr of the next optimizer step
  double loss_scale() const { return scaler_.scale(); }
  // Global gradient L2 norm of the last applied step (only computed when
  // gradient_clipping is on; nullopt otherwise).
  std::optional<double> last_grad_norm() const { return last_grad_norm_; }
  ModelStateBytes memory() const;

  // Parameters the engine trains, in model order, with their names.
  const std::vector<std::string>& param_names() const { return param_names_; }

  // Checkpoints in DeepSpeed's layout (docs/checkpoints.md). Collective:
  // every rank calls them with the same arguments, at an accumulation
  // boundary. SaveCheckpoint writes <dir>/<tag>/... (tag: "global_step<N>"
  // when empty) and then <dir>/latest; client_state is a dict of scalars,
  // strings, lists and dicts (no tensors) returned by LoadCheckpoint.
  // LoadCheckpoint reads <dir>/<tag or latest> saved at any world size and
  // stage; nothing changes unless every rank read everything.
  absl::Status SaveCheckpoint(const std::string& dir, const std::string& tag = "",
                              const ckpt::Value& client_state = ckpt::Value());
  absl::StatusOr<ckpt::Value> LoadCheckpoint(const std::string& dir, const std::string& tag = "");
  // Replaces the model's weights with those of a safetensors file, an index
  // .json or a directory holding either (Hugging Face names = the module's
  // names), reading only this rank's shard at stages 1-3. Collective.
  // Missing weights are an error naming them; extra ones are logged.
  absl::Status LoadWeights(const std::string& path);

  // One line describing where offloaded state lives ("" without offload).
  std::string OffloadSummary() const;
  OffloadStats offload_stats() const;

  // Stage 3: gathers, prefetches, peak gathered bytes, unit-order changes
  // (nullopt at stages 0-2). ResetGatheredPeak starts a new peak window.
  std::optional<zero::CoordinatorStats> stage3_stats() const;
  void ResetGatheredPeak();
  // Stage 3 keeps the buffers of released parameters for the next gather
  // (so pages are not faulted in again every time); this returns them to the
  // allocator, like torch.cuda.empty_cache(). Call between steps.
  void ReleaseCachedMemory();

 private:
  friend class GatheredParameters;

  Engine();
  absl::Status InitStage3(at::ScalarType dtype);
  // Offload: checks the config against this build, starts the I/O engine
  // for "nvme"; MakeOptimizer builds the sharded optimizer where the config
  // puts its state.
  absl::Status InitOffload();
  absl::Status MakeOptimizer();
  zero::GradReducerOptions ReducerOptions() const;  // from the config
  void InitScheduleAndScaler();
  absl::Status ConvertAndBroadcastBuffers(at::ScalarType dtype);
  // GatheredParameters support: chunks holding `params` (all when empty).
  std::vector<int> ChunksOf(const std::vector<at::Tensor>& params) const;
  void PinChunks(const std::vector<int>& chunks);
  void UnpinChunks(const std::vector<int>& chunks, std::optional<int> modifier_rank);
  // Checkpoint support (engine/checkpoint.cc).
  absl::Status CheckTagAgreement(const std::string& tag);
  // Reading weights for LoadCheckpoint / LoadWeights into fresh tensors
  // (committed only when every rank succeeded).
  //  * TrainableReader: fp32 elements [b, e) of a trainable parameter by name;
  //  * GroupReader: elements [b, e) of trainable group g's buffer in one go,
  //    where the source has exactly that group (nullopt where it does not);
  //  * FrozenReader: elements [b, e) of a frozen parameter into `dst`.
  using TrainableReader = std::function<absl::Status(const std::string& name, int64_t b, int64_t e, float* dst)>;
  using GroupReader = std::function<std::optional<absl::Status>(size_t g, int64_t b, int64_t e, float* dst)>;
  using FrozenReader = std::function<absl::Status(const std::string& name, int64_t b, int64_t e, at::Tensor dst)>;
  // This rank's range of every trainable group (the whole group at stage 0),
  // one fp32 tensor per group handed to `sink` in group order.
  using OwnedSink = std::function<absl::Status(size_t g, const at::Tensor& values)>;
  absl::Status ReadOwned(const TrainableReader& read, const GroupReader& whole, const OwnedSink& sink);
  // Every frozen parameter this rank holds: (destination, fresh values).
  absl::Status ReadFrozen(const FrozenReader& read, std::vector<std::pair<at::Tensor, at::Tensor>>* out);
  // Writes loaded frozen parameters into place (through swap buffers for
  // shards on NVMe) and re-gathers the full buffers that need it.
  void CommitFrozen(std::vector<std::pair<at::Tensor, at::Tensor>>& frozen);
  // Stage 3: the chunk holding `group` / whose shard is `shard` (-1: none).
  int ChunkOfGroup(const zero::FlatGroup* group) const;
  int ChunkOfShard(const at::Tensor& shard) const;
  absl::Status Init(std::shared_ptr<torch::nn::Module> model, Config config, std::shared_ptr<comm::ProcessGroup> group,
                    EngineOptions options);
  absl::Status BroadcastInitialState();
  void OptimizerStep();
  void GatherParams();
  void MaybeLog();
  void CheckWork(std::unique_ptr<comm::Work> work, const char* what);

  std::shared_ptr<torch::nn::Module> module_;
  Config config_;
  std::shared_ptr<comm::ProcessGroup> pg_;
  EngineOptions options_;
  int stage_ = 0;
  // NVMe offload's I/O engine (null without it); outlives every swapper.
  std::unique_ptr<offload::IoEngine> io_;

  std::vector<at::Tensor> params_;  // trainable, deduplicated, model order
  std::vector<std::string> param_names_;
  std::vector<zero::FlatGroup> groups_;
  // Stage 3: chunks of frozen parameters, the coordinator and the link the
  // units' hooks reach it through.
  std::vector<zero::FlatGroup> frozen_groups_;
  std::vector<at::Tensor> frozen_params_;
  std::vector<std::string> frozen_names_;
  std::unique_ptr<zero::ParamCoordinator> coordinator_;
  std::shared_ptr<zero::CoordinatorLink> link_;
  std::unique_ptr<zero::GradReducer> reducer_;
  std::unique_ptr<zero::ShardedOptimizer> optimizer_;
  std::unique_ptr<LrScheduler> scheduler_;
  LossScaler scaler_ = LossScaler::Disabled();

  int64_t micro_steps_ = 0;
  int64_t global_steps_ = 0;
  int64_t global_samples_ = 0;
  int64_t skipped_steps_ = 0;
  std::optional<double> last_grad_norm_;

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
};

}  // namespace zt
