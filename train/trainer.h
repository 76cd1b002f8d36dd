// One rank of a `zt train` job: builds the model, the data and the engine,
// runs the training loop with evaluation, monitors, checkpoints and the
// final export, and writes the report. Collective: every rank of the world
// calls it with the same options and config.
//
//   TrainOptions o;  o.model = "gpt2-tiny";  o.steps = 20;
//   ZT_ASSIGN_OR_RETURN(std::string json, ComposeConfigJson("", {}));
//   ZT_RETURN_IF_ERROR(RunTrainingRank(o, json, "the built-in default config"));
#pragma once

#include <string>

#include "absl/status/status.h"
#include "models/registry.h"
#include "train/train_options.h"

namespace zt::train {

// The rank environment comes from the process's variables (torchrun-style,
// Open MPI, SLURM; none: a single rank). Errors name the rank, file or key.
absl::Status RunTrainingRank(const TrainOptions& options, const std::string& config_json,
                             const std::string& config_source);

// What `zt train` checks before it starts any rank, so bad input fails once
// with one message instead of in every rank: the config at `world_size`
// ranks, the model and its dimensions, the data and the sequence length, the
// global batch against the training set, --init-from. Loads the data once;
// builds no model.
absl::Status CheckTrainJob(const TrainOptions& options, const std::string& config_json,
                           const std::string& config_source, int world_size);

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
