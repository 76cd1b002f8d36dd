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
//    gradient accumulation and drives the reduction. A gradient that reaches
//    a parameter outside it is never averaged across ranks; Step refuses it
//    with zt::Error naming the parameter, at every stage.
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

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ckpt/format/value.h"
#include "config/config.h"
#include "config/param_groups.h"
#include "engine/bf16_compute.h"
#include "zero/coordinator_stats.h"

namespace zt {

namespace comm {
class ProcessGroup;
}  // namespace comm

// Bytes of model state this rank holds (what the ZeRO formulas count).
struct ModelStateBytes {
  int64_t params = 0;            // flat parameter buffers (model dtype, padding included); stage 3:
                                 // the shards, plus persistent chunks in full
  int64_t grads = 0;             // full flat gradients (stages 0/1) or the local shard (stages 2/3)
  int64_t master = 0;            // fp32 master copy (0 when it aliases fp32 parameters)
  int64_t optimizer_state = 0;   // exp_avg, exp_avg_sq, ...
  int64_t peak_buckets = 0;      // reduction scratch kept across steps (most ever in use at once)
  int64_t peak_gathered = 0;     // stage 3: most gathered (non-persistent) parameter bytes at once
  int64_t gather_cache = 0;      // stage 3: idle gather buffers kept for reuse (<= peak_gathered)
  int64_t nvme = 0;              // NVMe offload: optimizer state and parameter shards in swap files
                                 // (not in memory, so not in the fields above)
  int64_t swap_buffers = 0;      // NVMe offload: host buffers of the swap pools (fixed by the config)
  int64_t hpz_secondary = 0;     // stage 3 with hpZ: the secondary shards (allocated at a chunk's first gather)
  int64_t quantized_frozen = 0;  // stage 3 with zero_quantized_nontrainable_weights: frozen chunks' int8 records
  int64_t error_feedback = 0;    // stage 3 with qgZ and zeropp_loco_param: LoCo's int8 error records
  // Model states in host memory (the ZeRO papers' per-rank figure).
  int64_t model_states() const {
    return params + grads + master + optimizer_state + hpz_secondary + quantized_frozen + error_feedback;
  }
};

// Collective payload this rank sent and received, by group (the comm/
// byte counters: since a group's creation or its last ResetStats). Flat
// sharding: every collective is the world's (`shard`). Hierarchical sharding
// (mics_shard_size K < world): `shard` inside this rank's K ranks (parameter
// gathers, gradient reduce-scatters: inside a host when K is the ranks per
// host), `replica` across the replicas of its shards (the gradient
// all-reduce), `world` the world group's own (setup broadcasts, agreements,
// the loss and overflow reductions).
struct CommTraffic {
  bool hierarchical = false;
  int64_t shard_sent = 0, shard_received = 0;
  int64_t replica_sent = 0, replica_received = 0;
  int64_t world_sent = 0, world_received = 0;
  // hpZ: gathers from the secondary shards, inside this rank's H ranks.
  int64_t hpz_sent = 0, hpz_received = 0;
  // Seconds this rank blocked waiting for each group's collectives (what
  // the communication did not hide behind compute; comm::CommStats).
  double shard_wait = 0, replica_wait = 0, world_wait = 0, hpz_wait = 0;
};

// NVMe offload traffic since Engine::Create (zeros without it).
struct OffloadStats {
  uint64_t optimizer_read_bytes = 0;
  uint64_t optimizer_written_bytes = 0;
  double optimizer_wait_seconds = 0;  // the step blocked on swap I/O (not overlapped)
  // Optimizer elements updated, and how many of them during backward
  // (EngineOptions::update_during_backward; a split update counts its state
  // half here and its parameter half at gather).
  uint64_t optimizer_elements_updated = 0;
  uint64_t optimizer_elements_in_backward = 0;
  // ... and how many where a forward gathered them (EngineOptions::update_at_gather).
  uint64_t optimizer_elements_at_gather = 0;
  uint64_t param_read_bytes = 0;
  uint64_t param_written_bytes = 0;
  uint64_t param_reads_ahead = 0;  // shard reads started ahead of their gather
  uint64_t param_hits = 0;         // shards already resident (or in flight) when needed
  double param_wait_seconds = 0;
  // Swap buffers registered with io_uring (IoEngine::Register), and the
  // transfer pieces that went through them without pinning pages.
  uint64_t io_bytes_registered = 0;
  uint64_t io_pieces_fixed = 0;
  // The C heap's trim threshold the engine set (EngineOptions::retain_step_heap);
  // 0: glibc's own.
  uint64_t heap_trim_threshold = 0;
};

struct EngineOptions {
  // Optimizer param groups (config/param_groups.h): per-group weight decay,
  // eps, betas (and a constant lr where no scheduler runs), what
  // deepspeed.initialize takes as model_parameters. Trainable parameters no
  // group names form a last group with the config's settings. Empty: one
  // group, the config's settings for every parameter. The groups are kept in
  // checkpoints and written to DeepSpeed's param_groups; every rank must
  // give the same groups (checked at Create). WeightDecayGroups
  // (engine/weight_decay_groups.h) builds HF Trainer's decay / no-decay pair.
  std::vector<ParamGroupOptions> param_groups;
  // With bf16 enabled: LibTorch's bf16 kernels, or bf16 tensors computing
  // their GEMMs and layer norm in fp32 (engine/bf16_compute.h). kAuto takes
  // the native kernels only where the CPU has bf16 instructions that
  // LibTorch's oneDNN uses; rank 0 logs the choice and why at Create. The
  // fp32 kernels are process-wide while the engine lives.
  Bf16Compute bf16_compute = Bf16Compute::kAuto;
  // Rank 0 logs the config's notes (legacy spellings, resolved "auto"
  // values, keys this build ignores) at Create. Off for a caller that
  // prints them itself (zt train).
  bool log_config_notes = true;
  // Rank 0 writes the config's csv_monitor / tensorboard events (DeepSpeed's
  // Train/Samples/train_loss, lr and loss_scale at every optimizer step,
  // x-axis: global samples), as DeepSpeed's engine does. Off for a caller
  // that writes its own (zt train).
  bool write_monitors = true;
  // The optimizer update runs where its NVMe swap I/O overlaps compute
  // when the run allows it: during the boundary Backward, or where the next
  // forward gathers the parameters, or split between the two
  // (plan/update_schedule.h; docs/offload.md). Bitwise the update in Step;
  // the start-up log says which schedule runs. The switches that turn such
  // fast paths off for comparisons are internal (engine/engine_tuning.h).
  // Parameter shards on NVMe (stage 3): at the first Backward, keep the heap a step
  // uses mapped between steps (util/heap_retention.h: glibc's trim threshold
  // at twice the heap then, its mmap threshold at 32 MiB), rather than glibc
  // returning the activations' memory after every backward and the next
  // forward faulting it in again. Process-wide; skipped where the
  // environment sets malloc's thresholds itself. Off: glibc's own policy.
  bool retain_step_heap = true;
  // Small files (plain file name -> contents) that rank 0 writes into every
  // checkpoint's folder as part of the save, published with it (e.g.
  // transformers' config.json, as HF Trainer's checkpoint folders hold one).
  // A name with a '/' or a reserved name is refused at Create.
  std::map<std::string, std::string> checkpoint_files;
};

// The engine's interface. Create returns the one implementation
// (engine/engine_impl.h, not part of the public API).
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

  virtual ~Engine() = default;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  virtual torch::nn::Module& module() = 0;
  virtual const Config& config() const = 0;
  virtual comm::ProcessGroup& process_group() = 0;

  // Runs backward on `loss` (a scalar from this rank's micro-batch) with the
  // loss scale and 1/gradient_accumulation_steps applied.
  virtual void Backward(const at::Tensor& loss) = 0;
  // At the accumulation boundary: reduces what is left, checks overflow,
  // clips, steps the optimizer and scheduler, gathers updated parameters.
  // Elsewhere it only advances the micro-step counter.
  virtual void Step() = 0;
  // Runs gradient_accumulation_steps micro-steps: loss = micro_loss(i),
  // Backward, Step. Returns the mean loss of this rank's micro-batches.
  virtual double TrainBatch(const std::function<at::Tensor(int64_t micro_step)>& micro_loss) = 0;

  // True when the next Step() is an optimizer step.
  virtual bool IsAccumulationBoundary() const = 0;
  virtual int64_t global_steps() const = 0;  // optimizer steps incl. skipped
  virtual int64_t global_samples() const = 0;
  virtual int64_t skipped_steps() const = 0;
  virtual int64_t micro_steps() const = 0;
  virtual double lr() const = 0;  // lr of the next optimizer step
  virtual double loss_scale() const = 0;
  // Global gradient L2 norm of the last applied step (only computed when
  // gradient_clipping is on; nullopt otherwise).
  virtual std::optional<double> last_grad_norm() const = 0;
  virtual ModelStateBytes memory() const = 0;

  // Parameters the engine trains, in model order, with their names.
  virtual const std::vector<std::string>& param_names() const = 0;
  // The optimizer's param groups as the engine resolved them: names,
  // settings, members in model order (one "default" group without
  // EngineOptions::param_groups). A resume may adopt a checkpoint's
  // (docs/checkpoints.md).
  virtual const ResolvedParamGroups& param_groups() const = 0;

  // Checkpoints in DeepSpeed's layout (docs/checkpoints.md). Collective:
  // every rank calls them with the same arguments, at an accumulation
  // boundary. SaveCheckpoint writes <dir>/<tag>/... (tag: "global_step<N>"
  // when empty) and then <dir>/latest; client_state is a dict of scalars,
  // strings, lists and dicts (no tensors) returned by LoadCheckpoint.
  // LoadCheckpoint reads <dir>/<tag or latest> saved at any world size and
  // stage; nothing changes unless every rank read everything.
  //
  // With checkpoint.async_save, SaveCheckpoint returns once this rank's
  // state is copied to host staging memory; the files are written in the
  // background and the save is committed (`latest` moved, errors reported)
  // at the first Step() after every rank's files are written, or by
  // WaitForPendingSave(). A failed background save makes that Step() throw
  // (zt::Error naming the checkpoint). SaveCheckpoint, LoadCheckpoint,
  // LoadWeights and ExportWeights first wait for a save in flight. The
  // parameters, master weights and optimizer state are copied after
  // SaveCheckpoint returns, until the next Step (or GatheredParameters):
  // a caller that writes parameters in place by other means in between
  // (not through the engine) changes what the checkpoint holds.
  virtual absl::Status SaveCheckpoint(const std::string& dir, const std::string& tag = "",
                                      const ckpt::Value& client_state = ckpt::Value()) = 0;
  // Waits for the asynchronous save in flight, if any, and commits it.
  // Collective. Call it before the end of training: an engine destroyed with
  // a save in flight finishes writing its files but cannot move `latest`
  // (that needs every rank), so the previous checkpoint stays the latest.
  virtual absl::Status WaitForPendingSave() = 0;
  virtual absl::StatusOr<ckpt::Value> LoadCheckpoint(const std::string& dir, const std::string& tag = "") = 0;
  // Writes the consolidated weights (fp32 master values, Hugging Face names,
  // buffers; tied aliases listed in the metadata) to `path`: a file ending in
  // ".safetensors", or a directory that gets model.safetensors (or shards and
  // an index above 5 GiB) -- what `zt ckpt consolidate` writes from a
  // checkpoint. Collective, at an accumulation boundary. It streams through
  // a temporary checkpoint beside `path` (removed afterwards), so memory stays
  // small but the disk needs room for one checkpoint more.
  virtual absl::Status ExportWeights(const std::string& path) = 0;
  // Replaces the model's weights with those of a safetensors file, an index
  // .json or a directory holding either (Hugging Face names = the module's
  // names), reading only this rank's shard at stages 1-3. Collective.
  // Missing weights are an error naming them, except LoRA adapters and the
  // trainable parameters named in `new_parameters` (a task head a base
  // model's file does not have, e.g. BERT's classifier.*), which keep their
  // values as transformers' from_pretrained keeps fresh heads; both are
  // logged. Extra weights in the file are logged.
  virtual absl::Status LoadWeights(const std::string& path, const std::vector<std::string>& new_parameters) = 0;
  absl::Status LoadWeights(const std::string& path) { return LoadWeights(path, {}); }

  // One line describing where offloaded state lives ("" without offload).
  virtual std::string OffloadSummary() const = 0;
  // Warnings about NVMe offload that saves no host memory here (its swap
  // buffers hold the whole offloaded state: plan/offload_note.h); logged
  // once at start-up on rank 0. Empty when every offload pays for itself.
  virtual std::vector<std::string> OffloadNotes() const = 0;
  virtual OffloadStats offload_stats() const = 0;
  virtual CommTraffic comm_traffic() const = 0;

  // Stage 3: gathers, prefetches, peak gathered bytes, unit-order changes
  // (nullopt at stages 0-2). ResetGatheredPeak starts a new peak window.
  virtual std::optional<zero::CoordinatorStats> stage3_stats() const = 0;
  virtual void ResetGatheredPeak() = 0;
  // Stage 3 keeps the buffers of released parameters for the next gather
  // (so pages are not faulted in again every time); this returns them to the
  // allocator, like torch.cuda.empty_cache(). Call between steps.
  virtual void ReleaseCachedMemory() = 0;

 protected:
  Engine() = default;

 private:
  // What GatheredParameters (engine/gathered_parameters.h) asks of the
  // engine, reachable from it only: the stage-3 chunks holding `params` (all
  // when empty; none below stage 3), pinned gathered while its scope is
  // open; unpinning shares the modifier rank's values (broadcast below
  // stage 3) and refreshes the optimizer's master copy.
  friend class GatheredParameters;
  virtual std::vector<int> ChunksOf(const std::vector<at::Tensor>& params) const = 0;
  virtual void PinChunks(const std::vector<int>& chunks) = 0;
  virtual void UnpinChunks(const std::vector<int>& chunks, std::optional<int> modifier_rank) = 0;
};

}  // namespace zt
