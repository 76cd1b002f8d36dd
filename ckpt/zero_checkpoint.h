// ZeRO checkpoints in DeepSpeed's directory layout, composed and read without
// LibTorch (the engine fills the tensors; `zt ckpt` reads them):
//
//   <dir>/latest                                          the newest tag, written last
//   <dir>/<tag>/mp_rank_00_model_states.pt                stages 0-2, rank 0
//   <dir>/<tag>/zero_pp_rank_<r>_mp_rank_00_model_states.pt   stage 3, every rank
//   <dir>/<tag>/[bf16_]zero_pp_rank_<r>_mp_rank_00_optim_states.pt  every rank
//
// Model states hold DeepSpeed's keys (module, buffer_names, param_shapes,
// frozen_param_shapes, shared_params, lr_scheduler, global_steps,
// global_samples, skipped_steps, dp_world_size, mp_world_size, ds_config,
// ds_version), the user's client_state, and zt_layout (checkpoint_layout.h).
// Optim states hold optimizer_state_dict = {zero_stage, partition_count,
// loss_scaler, dynamic_loss_scale, overflow, base_optimizer_state {state,
// param_groups}, single_partition_of_fp32_groups (stages 0-2) or
// fp32_flat_groups (stage 3)} for the rank's range of every group — at
// stage 0 too, so the files split the work evenly — plus the rank's RNG.
//
// ZeroCheckpoint reads any parameter's elements by name at any world size:
// it finds which saved ranks hold the range and reads only those bytes.
// It reads DeepSpeed's own checkpoints (stages 1-3; tested with DeepSpeed 0.14.5's fp32 and bf16 files) too:
// Open recognizes them (no zt_layout) and maps their partitions into the same
// SavedLayout (ckpt/deepspeed/reader.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ckpt/checkpoint_layout.h"
#include "ckpt/format/pt_file.h"
#include "ckpt/format/record_verifier.h"
#include "ckpt/format/value.h"

namespace zt::ckpt {

std::string ModelStatesFile(int stage, int rank);
std::string OptimStatesFile(int rank, DType model_dtype);

// Counters and scalars every rank agrees on.
struct TrainingState {
  int64_t global_steps = 0;
  int64_t global_samples = 0;
  int64_t skipped_steps = 0;
  int64_t micro_steps = 0;
  bool dynamic_loss_scale = false;
  double loss_scale = 1.0;
  int64_t scaler_cur_iter = 0;
  int64_t scaler_last_overflow_iter = -1;
  int64_t scaler_hysteresis = 1;
  std::string optimizer_type;  // "AdamW", "Adam", "SGD", "Adagrad", "Lion"
  int64_t optimizer_step = 0;  // steps the optimizer state has seen
  std::string ds_config;       // the config text
  // Shared by every file of one save and different for every save (rank 0
  // draws it, all ranks write it): files of different saves mixed in one
  // folder (swapped, or one rank's from an older step or another run) are
  // refused at Open even though each file's CRCs are fine. 0: not recorded
  // (checkpoints written before it existed), no check.
  int64_t save_id = 0;
};

// A fresh save id: random, positive, never 0.
int64_t NewSaveId();

// What one rank saves: its range of every group (all 1-D, contiguous).
struct RankShards {
  std::vector<TensorRef> master;                        // fp32, per trainable group
  std::map<std::string, std::vector<TensorRef>> state;  // fp32, per state name, per group
  std::vector<TensorRef> frozen;                        // model dtype, per frozen group (stage 3)
  std::optional<TensorRef> rng_cpu;                     // the CPU generator's state (uint8)
  // Hierarchical sharding: the generator states of the other ranks holding
  // this file's shards (replica 1, 2, ...; the file's own rank is replica 0),
  // so a resume in the same layout gives every rank its own stream back.
  std::vector<TensorRef> rng_cpu_replicas;
};

// The files' contents. `module` maps names to tensors (ordered): buffers,
// and at stages 0-2 the full parameters in the model dtype.
Value MakeOptimStates(const SavedLayout& layout, int rank, const RankShards& shards, const TrainingState& ts);
Value MakeModelStates(const SavedLayout& layout, int rank, const TrainingState& ts, const Dict& module,
                      const std::vector<std::string>& buffer_names, const RankShards& shards,
                      const Value& client_state);

// The tag `<dir>/latest` names (trimmed).
absl::StatusOr<std::string> ReadLatestTag(const std::string& dir);

struct CheckpointReadOptions {
  // Large reads bypass the page cache (O_DIRECT, util/direct_io.h): for the
  // tools that read a checkpoint once (consolidate, convert, reshard). The
  // engine's resume reads through the cache.
  bool direct_io = false;
  // Where the checkpoint's file `name` is read from instead of
  // `<dir>/<tag>/<name>`: a path, or empty for that default. A restart
  // points it at node-local memory copies (ckpt/memory_copies.h). Every
  // check still applies to whichever file is read (CRCs, one save id
  // across all the files, each rank's own names), so a damaged copy, or a
  // copy mixed with files of another save, is refused. That a complete set
  // of files is of the right save is the locator's to ensure
  // (MemoryCopies::Locate takes only copies of this directory and tag).
  std::function<std::string(const std::string& name)> locate;
};

class ZeroCheckpoint {
 public:
  // Opens `<dir>/<tag>` (tag empty: the one `latest` names), parses every
  // rank's files (directories and pickles only; tensor bytes stay on disk)
  // and checks they belong together. Errors name the file.
  static absl::StatusOr<std::unique_ptr<ZeroCheckpoint>> Open(const std::string& dir, const std::string& tag = "",
                                                              const CheckpointReadOptions& options = {});

  const std::string& dir() const { return dir_; }
  // Who wrote it: "zerotorch" or "DeepSpeed <version>".
  const std::string& format() const { return format_; }
  const std::string& tag() const { return tag_; }
  const SavedLayout& layout() const { return layout_; }
  const TrainingState& training_state() const { return ts_; }
  const Value& model_states() const { return model_[0]->root(); }  // rank 0's
  // Optimizer state tensor names ("exp_avg", "exp_avg_sq", ...).
  const std::vector<std::string>& state_names() const { return state_names_; }
  const Value* client_state() const;
  // Every file of the checkpoint, in rank order.
  std::vector<std::string> files() const;

  // fp32 elements [begin, end) of trainable parameter `name`'s master
  // ("master") or optimizer state (a state name). A read of a whole record
  // checks its CRC-32 on the way; pieces of a record are hashed as they are
  // read (RecordVerifier), and the record is checked when its last byte
  // is read or by VerifyRead.
  absl::Status ReadTrainable(const std::string& name, const std::string& what, int64_t begin, int64_t end,
                             float* dst) const;
  // fp32 elements [begin, end) of trainable group `group`'s padded buffer
  // ("master" or a state name), whatever ranks saved them.
  absl::Status ReadGroup(size_t group, const std::string& what, int64_t begin, int64_t end, float* dst) const;
  // Elements [begin, end) of frozen group `group`'s padded buffer, model dtype.
  absl::Status ReadFrozenGroup(size_t group, int64_t begin, int64_t end, void* dst) const;
  // Elements [begin, end) of frozen (stage 3) parameter `name`, model dtype.
  absl::Status ReadFrozen(const std::string& name, int64_t begin, int64_t end, void* dst) const;
  // A tensor of the `module` state dict (buffers; stages 0-2 also parameters).
  const TensorRef* ModuleTensor(const std::string& name) const;
  absl::Status ReadModuleTensor(const TensorRef& t, void* dst) const;
  // Elements [begin, end) of such a tensor (row-major), hashed on the way
  // like ReadTrainable's pieces (VerifyRead completes the check): what a
  // streaming writer uses instead of holding the whole tensor.
  absl::Status ReadModuleElements(const TensorRef& t, int64_t begin, int64_t end, void* dst) const;
  // Saved rank `rank`'s CPU RNG state, if saved.
  // `replica` > 0: the state of that replica of `rank`'s shards (saved
  // under hierarchical sharding; RankShards::rng_cpu_replicas).
  const TensorRef* RngState(int rank, int replica = 0) const;
  absl::Status ReadRngState(int rank, std::vector<uint8_t>* out, int replica = 0) const;

  // Checks every record of every file against its CRC-32.
  absl::Status VerifyAll() const;
  // Completes the CRC-32 check of every record read in part so far (reading
  // only what the reads did not hash). Callers must call it before they
  // publish anything built from Read* results: the bytes of a record read
  // in pieces are not known good until then.
  absl::Status VerifyRead() const;

 private:
  ZeroCheckpoint() = default;
  // Fills this checkpoint from zerotorch's files in `folder`; `first` is rank
  // 0's model states (a dict holding zt_layout). Reads every rank's files,
  // checks they are of one save and under their own rank's names, and that
  // each rank holds exactly its share of every group (zero_checkpoint.cc).
  absl::Status OpenZerotorch(const std::string& folder, std::unique_ptr<PtReader> first);
  // File `name` of the checkpoint's `folder`, where CheckpointReadOptions::locate says.
  std::string PathOf(const std::string& folder, const std::string& name) const;
  // One of the checkpoint's files, with the reads Open was asked for.
  absl::StatusOr<std::unique_ptr<PtReader>> OpenFile(const std::string& folder, const std::string& name) const;
  ReadFileOptions read_options_;
  std::function<std::string(const std::string&)> locate_;
  // Fills this checkpoint from DeepSpeed's files; `first` is rank 0's model
  // states (found as the file of `file_stage`'s naming), which carry no zt_layout.
  absl::Status OpenDeepSpeed(const std::string& folder, std::unique_ptr<PtReader> first, int file_stage);
  absl::Status ReadGroupRange(const std::vector<std::unique_ptr<PtReader>>& files,
                              const std::vector<std::vector<const TensorRef*>>& per_rank, size_t group,
                              int64_t padded_numel, int64_t begin, int64_t end, size_t elem_size, void* dst) const;
  absl::StatusOr<const std::vector<std::vector<const TensorRef*>>*> Source(const std::string& what) const;

  std::string dir_, tag_;
  std::string format_ = "zerotorch";
  // Stage-3 DeepSpeed files: each parameter's piece is a view into a rank's
  // flat tensor; the views live here (master_ and state_ point at them).
  std::vector<std::unique_ptr<TensorRef>> views_;
  SavedLayout layout_;
  TrainingState ts_;
  std::vector<std::unique_ptr<PtReader>> model_;  // rank 0 only at stages 0-2
  std::vector<std::unique_ptr<PtReader>> optim_;
  std::vector<std::string> state_names_;
  // [rank][group]: the master / each state / frozen fragments.
  std::vector<std::vector<const TensorRef*>> master_;
  std::map<std::string, std::vector<std::vector<const TensorRef*>>> state_;
  std::vector<std::vector<const TensorRef*>> frozen_;
  mutable RecordVerifier verifier_;
};

}  // namespace zt::ckpt
