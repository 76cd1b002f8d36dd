// What `zt train` checks before it starts any rank, without LibTorch: the
// front `zt` program runs these checks itself, so bad input fails at once,
// with one message, instead of after LibTorch has loaded or in every rank.
// Also where a run's files go and what it is called.
//
//   ZT_RETURN_IF_ERROR(CheckTrainJob(options, config_json, "ds.json", 2));
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/catalog/catalog.h"
#include "train/job/train_options.h"

namespace zt::train {

// The config at `world_size` ranks (fp16 compute, which needs CUDA, is the
// LibTorch side's to refuse: trainer.h), the model and its dimensions, the
// data and the sequence length, the global batch against the training set,
// the output and checkpoint directories (created), --init-from. Reads file
// headers and sizes; decodes no data, builds no model.
absl::Status CheckTrainJob(const TrainOptions& options, const std::string& config_json,
                           const std::string& config_source, int world_size);

// The tokens per sample: --seq-len, else the model's maximum (images: 0; a
// sequence classifier without --seq-len: 0, its longest example).
absl::StatusOr<int64_t> SeqLen(const TrainOptions& options, const models::ModelInfo& info);

// The training set must hold at least one global batch.
absl::Status CheckBatchFits(int64_t train_samples, int64_t global_batch);

// A data path (`flag` names it) must be a regular file or a directory.
absl::Status CheckDataPath(const char* flag, const std::string& path);

// Creates `dir` if needed and proves a file can be written there; `what`
// names it in the error.
absl::Status CheckWritableDir(const char* what, const std::string& dir);

// Where a run's files go, resolved from the options (all under output_dir
// unless given explicitly). Pure.
struct OutputPaths {
  std::string output_dir;
  std::string save_dir;     // checkpoints ("" : none)
  std::string export_path;  // consolidated safetensors ("" : none)
  std::string report;       // HTML report; empty: none
  std::string monitor_dir;  // csv_monitor / tensorboard output_path default
  std::string adapter_dir;  // LoRA runs: PEFT's adapter files
};
OutputPaths ResolveOutputPaths(const TrainOptions& options);

// What a run of `model` is called (output directory, monitors' job name):
// a preset's name, or a model folder's own name without its path.
std::string RunName(const std::string& model);

// The model the options name: preset or folder, overrides, seed, LoRA.
models::ModelSpec ModelSpecOf(const TrainOptions& options);

}  // namespace zt::train
