// `zt ckpt convert`: a checkpoint in either format (zerotorch's or
// DeepSpeed's, whatever ZeroCheckpoint::Open reads) written anew in the
// chosen format for any number of ranks, streaming tensor by tensor:
// --to zerotorch is Reshard (reshard.h), --to deepspeed WriteDeepSpeedFiles,
// --to universal WriteUniversalFiles (deepspeed_writer.h: DeepSpeed's
// universal checkpoint, one folder per parameter, for any world size).
//
// The destination appears whole or not at all: the files are written into a
// hidden staging folder inside `dst`, which is renamed to `dst/<tag>` only
// when every file is complete, and `dst/latest` is written (atomically) last
// (`dst/latest_universal` for a universal checkpoint, as DeepSpeed's
// ds_to_universal writes it and its load_universal reads it).
// A failure removes the staging folder and leaves `dst` as it was.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ckpt/zero_checkpoint.h"

namespace zt::ckpt {

enum class CheckpointFormat { kZerotorch, kDeepSpeed, kUniversal };

// "zerotorch", "deepspeed" or "universal"; InvalidArgument naming the
// choices otherwise.
absl::StatusOr<CheckpointFormat> ParseCheckpointFormat(const std::string& name);

struct ConvertOptions {
  CheckpointFormat to = CheckpointFormat::kZerotorch;
  int world_size = 0;  // 0: the source's (a universal checkpoint has no world size: must be 0)
  std::string tag;     // the destination's tag; empty: the source's
  // `dst` may hold other tags already (a training run's DeepSpeed copies,
  // one per save); a tag already there is replaced once the new one is
  // complete.
  bool add_tag = false;
};

// Writes `source` into `dst`, which must not exist or be an empty directory
// (InvalidArgument otherwise: converting never overwrites a checkpoint),
// unless options.add_tag.
absl::Status ConvertCheckpoint(const ZeroCheckpoint& source, const std::string& dst, const ConvertOptions& options);

}  // namespace zt::ckpt
