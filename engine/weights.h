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

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ckpt/format/dtype.h"

namespace zt {

// Named tensors to load a module from, whatever holds them (a safetensors
// file, a llama2.c model file, a training checkpoint's shards): each
// tensor's shape and dtype, and a reader of all of its bytes.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // Names the source in errors ("'model.safetensors'").
  virtual std::string Describe() const = 0;
  virtual std::vector<std::string> names() const = 0;
  struct Info {
    std::vector<int64_t> shape;
    ckpt::DType dtype = ckpt::DType::kFloat32;
  };
  virtual std::optional<Info> Find(const std::string& name) const = 0;
  // The whole tensor, row-major in Find's dtype, into `dst`.
  virtual absl::Status Read(const std::string& name, void* dst) const = 0;
};

// A safetensors file, an index .json or a directory holding either, as a source.
absl::StatusOr<std::unique_ptr<WeightSource>> OpenSafetensorsSource(const std::string& path);

// LoadSafetensors' rules for any source: every parameter and buffer of
// `module` (a tied alias may be absent), shapes equal, floating point into
// floating point; nothing is copied unless everything reads.
absl::Status LoadWeights(torch::nn::Module& module, const WeightSource& source, bool strict = false);

// Copies every parameter and buffer of `module` from `path` (dtypes convert).
// Missing names are an error listing them (a tied alias may be absent);
// with strict, so are tensors the module does not have; shapes must match.
absl::Status LoadSafetensors(torch::nn::Module& module, const std::string& path, bool strict = false);

}  // namespace zt
