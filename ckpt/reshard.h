// Resharding a checkpoint for another world size, offline (`zt ckpt
// reshard`): same stage, same groups, each group re-padded the engine's way
// for the new number of ranks and re-split; every rank file written anew.
// Loading at another world size does the same on the fly, so this is for
// handing a checkpoint to a DeepSpeed-style tool that expects N files.
//
// Memory: one rank's share of the largest group at a time, plus (stages
// 0-2) the `module` state dict, which is copied whole.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "ckpt/zero_checkpoint.h"

namespace zt::ckpt {

// Writes `<out_dir>/<tag>/...` for `world` ranks and `<out_dir>/latest`.
absl::Status Reshard(const ZeroCheckpoint& checkpoint, const std::string& out_dir, int world);

}  // namespace zt::ckpt
