// `zt ckpt convert`: a checkpoint in either format (zerotorch's or
// DeepSpeed's, whatever ZeroCheckpoint::Open reads) written anew in the
// chosen format for any number of ranks, streaming tensor by tensor:
// --to zerotorch is Reshard (reshard.h), --to deepspeed WriteDeepSpeedFiles
// (deepspeed_writer.h).
//
// The destination appears whole or not at all: the files are written into a
// hidden staging folder inside `dst`, which is renamed to `dst/<tag>` only
// when every file is complete, and `dst/latest` is written (atomically) last.
// A failure removes the staging folder and leaves `dst` as it was.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ckpt/zero_checkpoint.h"

namespace zt::ckpt {

enum class CheckpointFormat { kZerotorch, kDeepSpeed };

// "zerotorch" or "deepspeed"; InvalidArgument naming the choices otherwise.
absl::StatusOr<CheckpointFormat> ParseCheckpointFormat(const std::string& name);

struct ConvertOptions {
  CheckpointFormat to = CheckpointFormat::kZerotorch;
  int world_size = 0;  // 0: the source's
  std::string tag;     // the destination's tag; empty: the source's
};

// Writes `source` into `dst`, which must not exist or be an empty directory
// (InvalidArgument otherwise: converting never overwrites a checkpoint).
absl::Status ConvertCheckpoint(const ZeroCheckpoint& source, const std::string& dst, const ConvertOptions& options);

}  // namespace zt::ckpt
