// zt::ShardedInit: build a model too large for one rank (DeepSpeed's
// zero.Init). While one is alive on this thread, every zt::Unit shards its
// own parameters the moment it is constructed: rank 0's initial values are
// broadcast, each rank keeps its shard, the full tensors are freed. Peak
// memory during construction stays near the largest unit plus the shards.
//
//   {
//     zt::ShardedInit init(pg, config);        // config: zero_optimization.stage 3
//     model = Gpt(options);                     // units shard as they are built
//   }
//   auto engine = zt::ValueOrThrow(zt::Engine::Create(model, config, pg));
//
// Contract:
//  * Collective: every rank builds the same model inside its ShardedInit.
//  * Custom initialization belongs in the unit's own constructor (it runs
//    before the unit shards itself) or in zt::GatheredParameters with a
//    modifier rank afterwards: outside them a sharded parameter has no data.
//  * Parameters outside every unit stay whole (they belong to the root).
//    Weights tied across units must be tied inside the units' common
//    ancestor unit, since a unit shards before its parent exists.
//  * Engine::Create must get the same process group and a config that plans
//    the same way (world size, stage 3, mics_shard_size, dtype,
//    reduce_bucket_size, persistence thresholds); it reports any difference.
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <vector>

#include "comm/process_group.h"
#include "config/config.h"
#include "plan/unit_plan.h"
#include "zero/flat_group.h"
#include "zero/stage3_setup.h"
#include "zero/unit.h"

namespace zt {

class ShardedInit {
 public:
  // Throws zt::Error when the config is not stage 3 or another ShardedInit is
  // active on this thread.
  ShardedInit(std::shared_ptr<comm::ProcessGroup> pg, const Config& config);
  ~ShardedInit();
  ShardedInit(const ShardedInit&) = delete;
  ShardedInit& operator=(const ShardedInit&) = delete;

  comm::ProcessGroup& pg() { return *pg_; }
  // What the units are sharded over: pg(), or under hierarchical sharding
  // (zero_optimization.mics_shard_size) this rank's shard group, made here
  // as Engine::Create makes its own (DeepSpeed's MiCS_Init).
  comm::ProcessGroup& shard_pg() { return *shard_pg_; }
  const zero::Stage3Options& options() const { return options_; }
  int64_t* persistent_used() { return &persistent_used_; }

 private:
  std::shared_ptr<comm::ProcessGroup> pg_;
  std::shared_ptr<comm::ProcessGroup> shard_pg_;  // after pg_: destroyed before it
  zero::Stage3Options options_;
  int64_t persistent_used_ = 0;
};

namespace zero {

// A unit's shards made at construction, waiting for Engine::Create.
struct PresharedUnit {
  std::vector<at::Tensor> params;  // the unit's own parameters; slots index this list
  std::vector<plan::ChunkLayout> layouts;
  std::vector<FlatGroup> groups;  // one per layout, released
  int world_size = 1;
  Stage3Options options;
};

// Called by UnitImpl's constructor: shards `self` when a ShardedInit is
// active on this thread, else does nothing.
void ShardAtConstruction(torch::nn::Module& self, UnitBase& unit);

// Stage-3 options from a config (shared by Engine::Create and ShardedInit).
Stage3Options Stage3OptionsFromConfig(const Config& config);

}  // namespace zero
}  // namespace zt
