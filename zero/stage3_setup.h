// Stage 3 at Engine::Create: finds the zt::Units in a module tree, gives
// every parameter to exactly one unit, plans each unit's chunks
// (zero/unit_plan.h) and shards them, adopting the shards of units that
// zt::ShardedInit already sharded while the model was built.
//
// Sharding a chunk from full parameters is collective (rank 0's values are
// broadcast, so replicas start identical): every rank must call BuildStage3
// with the same model architecture and options.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/process_group.h"
#include "plan/unit_plan.h"
#include "zero/flat_group.h"
#include "zero/unit.h"

namespace zt::zero {

struct Stage3Options {
  int64_t bucket_numel = 500000000;  // reduce_bucket_size: the largest chunk
  plan::PersistencePolicy persistence;
  at::ScalarType dtype = at::kFloat;  // the model's training dtype
};

// What BuildStage3 made. Parameter indices: trainable ones first (in model
// order, as the engine trains them), then frozen ones.
struct Stage3Build {
  std::vector<at::Tensor> params;
  std::vector<std::string> names;
  int num_trainable = 0;

  std::vector<FlatGroup> trainable_chunks;  // the reducer's and the optimizer's groups
  std::vector<FlatGroup> frozen_chunks;
  struct ChunkRef {
    bool trainable = true;
    int index = 0;  // into trainable_chunks or frozen_chunks
    int unit = 0;
    bool persistent = false;
  };
  std::vector<ChunkRef> chunks;  // every chunk, unit by unit

  struct Unit {
    std::string name;          // module path ("" for the root)
    UnitBase* base = nullptr;  // the zt::Unit (null for the root)
    std::vector<int> chunks;   // indices into `chunks`
  };
  // [0] is the root (parameters outside every unit; always gathered).
  std::vector<Unit> units;
  int64_t root_numel = 0;  // parameters outside every unit
};

// `shard`: the group the chunks are split over (the world, or this rank's
// shard group under hierarchical sharding); `world`: every rank, over which
// rank 0's initial values are broadcast.
absl::StatusOr<Stage3Build> BuildStage3(torch::nn::Module& model, comm::ProcessGroup& shard, comm::ProcessGroup& world,
                                        const Stage3Options& options);

// Flattens one chunk's parameters into a new buffer of `dtype` (parameters
// become views of it) and broadcasts rank 0's values. A persistent chunk
// keeps the full buffer and owns a slice of it
// (ParamResidency::kOwnsSliceOfFull); a non-persistent one keeps this rank's
// shard in `param_shard` and frees the buffer (ParamResidency::kShardOnly).
// The shard is this rank's place in `shard`; the broadcast is over `world`
// (the same group for flat sharding). Collective over `world`. Throws
// zt::Error on a communication failure.
FlatGroup ShardChunk(const plan::ChunkLayout& chunk, const std::vector<at::Tensor>& params, comm::ProcessGroup& shard,
                     comm::ProcessGroup& world, at::ScalarType dtype);

}  // namespace zt::zero
