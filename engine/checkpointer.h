// Checkpoints of one engine: SaveCheckpoint, LoadCheckpoint and LoadWeights
// (engine/engine.h) over the state the engine's training half uses
// (engine/engine_core.h). The files' contents and layout are
// ckpt/zero_checkpoint.h's; here tensor references are pointed at the
// engine's buffers, ranks are kept in agreement, and whatever world size
// and stage saved a checkpoint is read back into this rank's shards.
// Internal to zt_engine.
//
// Every load runs the same three phases:
//   read   -- into fresh tensors (and a staging optimizer store); nothing
//             the engine trains with changes;
//   agree  -- one collective: did every rank read everything?
//   commit -- only then are the staged values moved into place.
// So a load that fails on any rank (missing file, wrong model, a rank out
// of memory) leaves every rank's training state as it was.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ckpt/format/safetensors.h"
#include "ckpt/format/value.h"
#include "ckpt/zero_checkpoint.h"
#include "engine/engine_core.h"
#include "engine/neighbour_copies.h"

namespace zt {

class Checkpointer {
 public:
  explicit Checkpointer(EngineCore& core) : core_(core) {}

  // engine/engine.h's contracts: collective, at an accumulation boundary.
  // Save = Prepare, WriteFiles, Commit.
  absl::Status Save(const std::string& dir, const std::string& tag, const ckpt::Value& client_state);

  // A save split in three, so that the files can be written off the training
  // thread (engine/background_save.h):
  //  * Prepare (collective): checks, the save id, what this rank writes; the
  //    references point at live state (or `keep`) until snapshotted;
  //  * WriteFiles (this rank alone, any thread; no collective, no engine
  //    state touched): the files into `staging`;
  //  * Commit (collective): every rank's outcome agreed, then rank 0
  //    publishes the tag and moves `latest`. A failure anywhere leaves the
  //    previous checkpoint and `latest` as they were.
  struct PreparedSave {
    std::string dir, tag, folder, staging;
    bool replacing = false;           // an existing tag is written beside it
    bool writes = false;              // this rank writes files (replica 0)
    bool write_model_states = false;  // ... and the model states file
    int file_rank = 0;
    ckpt::SavedLayout layout;
    ckpt::RankShards shards;
    ckpt::TrainingState ts;
    ckpt::Dict module;
    std::vector<std::string> buffer_names;
    ckpt::Value client_state;
    std::map<std::string, std::string> extra_files;  // EngineOptions::checkpoint_files (file rank 0)
    std::vector<at::Tensor> keep;                    // copies the references point into
    absl::Status replicas_agree;                     // hierarchical sharding's check, before any file
  };
  absl::StatusOr<PreparedSave> Prepare(const std::string& dir, const std::string& tag, const ckpt::Value& client_state);
  static absl::Status WriteFiles(const PreparedSave& p);
  absl::Status Commit(const PreparedSave& p, const absl::Status& local);
  absl::StatusOr<ckpt::Value> Load(const std::string& dir, const std::string& tag);
  absl::Status LoadWeights(const std::string& path, const std::vector<std::string>& new_parameters);
  // Save into a temporary folder beside `path`, rank 0 exports it
  // (ckpt/export.h), the folder goes.
  absl::Status ExportWeights(const std::string& path);

 private:
  // (destination, staged values) pairs, written into place at commit.
  using TensorCopies = std::vector<std::pair<at::Tensor, at::Tensor>>;
  // What the read phase of a load staged.
  struct Staged {
    std::vector<at::Tensor> masters;  // per trainable group: this rank's fp32 range
    TensorCopies frozen;              // frozen parameters (shards at stage 3)
    TensorCopies buffers;             // module buffers
  };

  // Runs `read` (exceptions become errors; a failure is logged), then agrees
  // across ranks: OK only when every rank's read succeeded.
  absl::Status ReadAndAgree(const std::function<absl::Status()>& read, const std::string& what);
  // Commit of the frozen parameters and buffers of `staged`.
  void CommitFrozenAndBuffers(Staged& staged);

  // Readers into fresh tensors, shared by both loads:
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
  // Where the values may go instead: zero-filled memory of the range's
  // size that group g is read straight into (sink is then not called for
  // it), or an undefined tensor for a fresh one handed to sink.
  using OwnedPlace = std::function<at::Tensor(size_t g)>;
  absl::Status ReadOwned(const TrainableReader& read, const GroupReader& whole, const OwnedSink& sink,
                         const OwnedPlace& place = nullptr);
  // Every frozen parameter this rank holds: (destination, fresh values).
  absl::Status ReadFrozen(const FrozenReader& read, TensorCopies* out);
  // Writes loaded frozen parameters into place (through swap buffers for
  // shards on NVMe) and re-gathers the full buffers that need it.
  void CommitFrozen(TensorCopies& frozen);

  // Save's steps, in order.
  absl::Status CheckTagAgreement(const std::string& tag);
  ckpt::SavedLayout CurrentLayout() const;
  // The module state dict: buffers, and at stages 0-2 the full parameters
  // (copies in `keep`); the buffers' names in `buffer_names`.
  ckpt::Dict ModuleStateDict(std::vector<at::Tensor>* keep, std::vector<std::string>* buffer_names);
  // This rank's range of every group: views of resident state, copies
  // (`keep`) of stage-0 slices and frozen shards, and sources that stream
  // state kept on NVMe into the file chunk by chunk.
  ckpt::RankShards CurrentShards(const ckpt::SavedLayout& layout, std::vector<at::Tensor>* keep);
  ckpt::TrainingState CurrentTrainingState() const;
  // One save id for every file (rank 0's), and whether `folder` exists on
  // any rank. Collective.
  absl::Status AgreeOnSaveId(const std::string& folder, ckpt::TrainingState* ts, bool* replacing);
  // Hierarchical sharding: the replicas of this rank's shards must hold the
  // same master and optimizer state bit for bit (only replica 0 writes them).
  // Compares a hash of the in-memory state across the replica group;
  // FailedPrecondition naming the replicas' world ranks when they differ.
  // Collective over the replica group; OK at once without one.
  absl::Status CheckReplicasAgree();
  // Once every rank's files are complete: swap a replaced tag in, export the
  // 16-bit weights if configured, and move `latest` (rank 0 only).
  void RemoveStaleSaves(const std::string& dir, const std::string& current);
  absl::Status Publish(const std::string& dir, const std::string& tag, const std::string& staging,
                       const ckpt::SavedLayout& layout, int64_t save_id);

  // Elements [b, e) of trainable parameter `name` as the fp32 master holds
  // them now; [b, e) lies in this rank's owned range.
  absl::Status CurrentMaster(const std::string& name, int64_t b, int64_t e, float* dst);
  // LoadWeights' steps. The model's weight names (trainable and frozen
  // parameters under every name they are registered by, buffers) with their
  // element counts and shapes.
  struct WeightShapes {
    std::unordered_map<std::string, int64_t> numel_of;               // parameters
    std::unordered_map<std::string, std::vector<int64_t>> shape_of;  // parameters and buffers
  };
  WeightShapes ModelWeightShapes() const;
  // Elements [b, e) of the file's tensor `name` into `dst` (its dtype), once
  // the tensor is checked against the model's: `numel` elements, the same
  // shape up to size-1 dimensions, floating point where the model's is.
  static absl::Status ReadWeightRange(const ckpt::SafetensorsModel& model, const std::string& path,
                                      const WeightShapes& shapes, const std::string& name, int64_t numel, int64_t b,
                                      int64_t e, at::Tensor dst);
  // The trainable names the file may lack, which keep their values (LoRA
  // adapters, `new_parameters`); NotFound listing every other missing name.
  absl::StatusOr<std::set<std::string>> WeightsKeptByModel(const ckpt::SafetensorsModel& model, const std::string& path,
                                                           const WeightShapes& shapes,
                                                           const std::vector<std::string>& new_parameters);
  // This rank's masters, frozen shards and buffers from the file.
  absl::Status StageWeights(const ckpt::SafetensorsModel& model, const std::string& path, const WeightShapes& shapes,
                            const std::set<std::string>& kept, Staged* staged);
  // The log lines: what was loaded, the file's tensors the model does not
  // have (`numel_of`: the model's parameter names), what kept its values.
  void LogLoadedWeights(const std::string& path, const ckpt::SafetensorsModel& model,
                        const std::unordered_map<std::string, int64_t>& numel_of, const std::set<std::string>& kept);

  // Load's steps.
  // `adopt_groups`: the checkpoint's param groups, where the run resumes
  // with them (CheckGroupSettings).
  absl::Status CheckSameModel(const ckpt::ZeroCheckpoint& ck, const std::string& where,
                              std::optional<ResolvedParamGroups>* adopt_groups) const;
  // The checkpoint's recorded param groups against the run's. A run with
  // groups of its own must have the checkpoint's (same members, same
  // weight_decay / eps / betas), else FailedPrecondition naming both groups
  // and the value. A run without groups resumes with the checkpoint's where
  // they differ from its config (*adopt set; committed by Load with a
  // warning), as DeepSpeed does.
  absl::Status CheckGroupSettings(const ckpt::ZeroCheckpoint& ck, const std::string& where,
                                  std::optional<ResolvedParamGroups>* adopt) const;
  absl::Status ReadCheckpointState(const ckpt::ZeroCheckpoint& ck, const std::string& where,
                                   std::unique_ptr<zero::OptimizerState>* optimizer_state, Staged* staged);

  // In-memory copies of the checkpoints (ZT_MEMORY_COPIES_DIR, which the
  // launcher sets on every rank or none: zt launch --memory-copies; compared
  // across nodes by the launchers' agreement); nullptr when off. Made on
  // first use, kept in EngineCore::memory_copies.
  NeighbourCopies* Copies();
  // The files this rank wrote for save `p` (names in its folder).
  static std::vector<std::string> OwnFiles(const PreparedSave& p);

  EngineCore& core_;
  // Whether this object's saves keep memory copies (not ExportWeights' scratch save).
  bool keep_memory_copies_ = true;
};

}  // namespace zt
