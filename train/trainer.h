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
#include "train/job/job_check.h"
#include "train/job/train_options.h"

namespace zt::train {

// The rank environment comes from the process's variables (torchrun-style,
// Open MPI, SLURM; none: a single rank). Errors name the rank, file or key.
absl::Status RunTrainingRank(const TrainOptions& options, const std::string& config_json,
                             const std::string& config_source);

// What only the LibTorch side can tell before any rank starts: fp16 compute
// needs CUDA, which this build's LibTorch may lack (its CPU kernels have no
// fp16 LayerNorm, matmul and more: the ranks would fail at their first
// forward). The rest of the checks are CheckTrainJob (job_check.h).
absl::Status CheckComputeDevice(const std::string& config_json, const std::string& config_source, int world_size);

}  // namespace zt::train
