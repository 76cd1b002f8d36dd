// Argument checks shared by every backend, so a wrong shard size or dtype is
// an InvalidArgument naming the collective and the fix, never a hang or a
// corrupted buffer.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

#include "absl/status/status.h"
#include "comm/process_group.h"

namespace zt::comm {

// Device every tensor must be on; nullopt: any device, but all arguments of
// one call on the same one (the single-rank backend).
using RequiredDevice = std::optional<c10::DeviceType>;

// Also reports whether `shard` is `flat`'s own slice (in-place all-gather).
absl::Status CheckAllGatherArgs(const at::Tensor& shard, const at::Tensor& flat, int rank, int world,
                                RequiredDevice device, bool* in_place);

// `shard` may be `flat`'s own slice (then that slice is overwritten); any
// other overlap is an error.
absl::Status CheckReduceScatterArgs(const at::Tensor& flat, const at::Tensor& shard, ReduceOp op, int rank, int world,
                                    RequiredDevice device);

absl::Status CheckAllReduceArgs(const at::Tensor& tensor, ReduceOp op, RequiredDevice device);

absl::Status CheckBroadcastArgs(const at::Tensor& tensor, int root, int world, RequiredDevice device);

// Same dtype and numel, numel divisible by `world`, no overlap.
absl::Status CheckAllToAllArgs(const at::Tensor& input, const at::Tensor& output, int world, RequiredDevice device);

}  // namespace zt::comm
