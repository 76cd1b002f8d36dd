// Consolidated export: one set of full weights from a sharded checkpoint, as
// safetensors with the parameters' own names (Hugging Face names for the
// built-in models), in one file or in shards with an index.
//
// Streaming: each tensor is read from the ranks' files in chunks of
// `chunk_elements`, converted and written, so peak memory stays near a few
// chunks whatever the model size (DeepSpeed's zero_to_fp32 once needed more
// memory than the model). Trainable parameters come from the fp32 master;
// frozen parameters and buffers from where they were saved. Weights tied
// under several names are written once, under the name they were saved by;
// the aliases go into the metadata ("zt_tied": "alias=name,...").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ckpt/format/dtype.h"
#include "ckpt/format/safetensors.h"
#include "ckpt/zero_checkpoint.h"

namespace zt::ckpt {

// What happens to LoRA adapters (parameters under a lora_A / lora_B layer,
// lora/lora_layer.h) on export.
enum class LoraExport {
  kAsSaved,      // every tensor under its own name, adapters included
  kMerged,       // W + scaling * B A into each adapted weight, adapters left out:
                 // the base model's own names and shapes
  kAdapterOnly,  // only the adapters, named as PEFT's adapter_model.safetensors
                 // (base_model.model.<name>)
};

struct ExportOptions {
  // Floating-point tensors are written in this dtype (integer buffers keep theirs).
  DType dtype = DType::kFloat32;
  // Larger outputs are split into shards of at most this many bytes.
  uint64_t max_shard_bytes = 5ull << 30;
  bool include_buffers = true;
  // Also write every tied alias (e.g. lm_head.weight tied to wte.weight) as a
  // tensor of its own, as DeepSpeed's zero_to_fp32 does. Off: aliases are
  // listed in the metadata ("zt_tied") and left out, as Hugging Face does.
  bool tied_copies = false;
  int64_t chunk_elements = 4 << 20;
  // Large shards reach the disk with O_DIRECT (AtomicFileOptions): for the
  // consolidation tool, which writes the whole model once.
  bool direct_io = false;
  LoraExport lora = LoraExport::kAsSaved;
  double lora_scaling = 0.0;         // alpha / r; kMerged needs it
  bool lora_fan_in_fan_out = false;  // adapted weights are stored [in, out] (GPT-2's Conv1D)
  // kAdapterOnly: modules trained in full beside the adapters (PEFT's
  // modules_to_save, e.g. a classifier), written with the adapters under
  // PEFT's names (base_model.model.classifier.weight).
  std::vector<std::string> lora_modules_to_save;
};

struct ExportResult {
  std::vector<std::string> files;  // written, in order (index last when sharded)
  int64_t tensors = 0;
  uint64_t bytes = 0;  // tensor bytes written
};

// One tensor of an export: its entry (name, dtype as written, shape) and a
// reader of elements [b, e) in the dtype it was saved in (`source`).
// Pieces read are hashed on the way; the caller completes the check with
// ZeroCheckpoint::VerifyRead before it trusts what it read.
struct ExportTensor {
  SafetensorsEntry entry;
  DType source = DType::kFloat32;
  int64_t numel = 0;
  std::function<absl::Status(int64_t b, int64_t e, void* dst)> read;
  // Elements [b, e) converted to entry.dtype.
  absl::Status ReadAs(int64_t begin, int64_t end, void* dst) const;
};

// The tensors ExportSafetensors writes, in its order, each readable on its
// own: what `zt generate` loads from a training checkpoint (gathered from
// every rank's shards) without writing a file. Valid while `checkpoint` is.
absl::StatusOr<std::vector<ExportTensor>> ExportTensors(const ZeroCheckpoint& checkpoint,
                                                        const ExportOptions& options = {});

// `out`: a path ending in ".safetensors" (one file; it must fit one shard) or
// a directory (created if needed) that gets model.safetensors, or
// model-0000k-of-0000n.safetensors + model.safetensors.index.json.
// In a directory, weights files of an earlier export that this one does not
// rewrite (model.safetensors, shards, the index) are removed afterwards.
absl::StatusOr<ExportResult> ExportSafetensors(const ZeroCheckpoint& checkpoint, const std::string& out,
                                               const ExportOptions& options = {});

}  // namespace zt::ckpt
