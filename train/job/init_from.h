// --init-from as the weights the ranks load. A safetensors file, index or
// folder is loaded as it is (each rank reads its shard). A llama2.c model
// file (ckpt/format/llama2c.h) cannot be read by shard -- its q/k rows are
// stored in another order -- so it is converted once into
// <output-dir>/init-from-llama2c, a Hugging Face folder as `zt ckpt convert
// FILE DIR --to hf` writes it, and that is loaded; the folder is reused
// while the file's path, size and modification time are unchanged (its
// zt_source.json records them). No LibTorch.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "train/job/train_options.h"

namespace zt::train {

bool InitFromIsLlama2c(const TrainOptions& o);

// The path the ranks load: o.init_from, or the converted folder.
std::string InitFromWeights(const TrainOptions& o);

// Converts a llama2.c --init-from when the converted folder is missing or
// stale (written to a temporary folder, then renamed into place, so a
// crash or a second host doing the same leaves no half-written folder).
// Returns true when it converted, false when there was nothing to do.
absl::StatusOr<bool> PrepareInitFrom(const TrainOptions& o);

}  // namespace zt::train
