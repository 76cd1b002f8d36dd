// Weights in and out of safetensors (Hugging Face's format, the names being
// the module's own), outside any engine:
//
//   absl::Status st = zt::LoadSafetensors(*model, "gpt2/model.safetensors");
//
// Loading before Engine::Create materializes the whole model on every rank;
// under stage 3 use Engine::LoadWeights after Create instead, which reads
// only each rank's shard. Both accept a .safetensors file, an index .json or
// a directory holding either.
#pragma once

#include <torch/nn/module.h>

#include <string>

#include "absl/status/status.h"

namespace zt {

// Copies every parameter and buffer of `module` from `path` (dtypes convert).
// Missing names are an error listing them (a tied alias may be absent);
// with strict, so are tensors the module does not have; shapes must match.
absl::Status LoadSafetensors(torch::nn::Module& module, const std::string& path, bool strict = false);

}  // namespace zt
