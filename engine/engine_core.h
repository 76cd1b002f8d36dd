// The state of one engine that its two halves share: training
// (engine/engine_impl.h) and checkpointing (engine/checkpointer.h). Internal
// to zt_engine; users see engine/engine.h only.
//
// Ownership and lifetime:
//  * EngineImpl owns exactly one EngineCore and fills it once, in
//    engine/engine_setup.cc; Checkpointer holds a reference to it.
//  * After setup `groups` and `frozen_groups` are never resized or reordered:
//    GradReducer, ShardedOptimizer and ParamCoordinator keep pointers into
//    them for the engine's life.
//  * `io` is declared before the objects that swap through it, so it is
//    destroyed after them.
//  * "pg" is the process group (ranks); "group" is always a flat parameter
//    group (zero/flat_group.h).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/process_group.h"
#include "comm/two_hop_gather.h"
#include "config/config.h"
#include "config/param_groups.h"
#include "engine/engine.h"
#include "engine/engine_tuning.h"
#include "engine/loss_scaler.h"
#include "offload/io_engine.h"
#include "plan/stage_sharding.h"
#include "schedule/lr_scheduler.h"
#include "zero/flat_group.h"
#include "zero/grad_reducer.h"
#include "zero/param_coordinator.h"
#include "zero/sharded_optimizer.h"
#include "zero/unit_hook.h"

namespace zt {

class NeighbourCopies;  // engine/neighbour_copies.h

struct EngineCore {
  // ---- Fixed at setup (engine/engine_setup.cc), never reassigned after ----
  std::shared_ptr<torch::nn::Module> module;
  Config config;
  std::shared_ptr<comm::ProcessGroup> pg;
  // What a shard is split over and who else holds it (comm/shard_groups.h).
  // Flat ZeRO: shard_pg is pg and replica_pg is null. MiCS / HSDP
  // (mics_shard_size K < world): shard_pg is this rank's K consecutive ranks
  // and replica_pg the world / K ranks holding the same shard. Declared
  // after pg: sub-groups go before the world group they came from.
  std::shared_ptr<comm::ProcessGroup> shard_pg;
  std::shared_ptr<comm::ProcessGroup> replica_pg;
  // ZeRO++ hpZ (zero_hpz_partition_size H > 1, stage 3): this rank's H
  // consecutive ranks, over which backward re-gathers the secondary shards
  // (ParamCoordinator::SetSecondaryGroup). Null: off.
  std::shared_ptr<comm::ProcessGroup> hpz_pg;
  // mics_hierarchical_params_gather where the shard group spans hosts: the
  // two-hop gather over it (its sub-groups come from shard_pg). Null: off.
  std::shared_ptr<comm::TwoHopGather> two_hop;
  EngineOptions options;
  EngineTuning tuning;
  plan::StageSharding sharding;  // what the config's ZeRO stage shards
  // NVMe offload's I/O engine (null without it); outlives every swapper.
  std::unique_ptr<offload::IoEngine> io;

  // Trainable parameters: deduplicated, in model order, with their names,
  // flattened into `groups` (stages 0-2: reduction buckets; stage 3: the
  // trainable chunks of every unit). The lists and the groups' layout are
  // fixed; the tensors' values and residency change with training.
  std::vector<at::Tensor> params;
  std::vector<std::string> param_names;
  std::vector<zero::FlatGroup> groups;
  // Stage 3 only: frozen parameters and their chunks. At stages 0-2 frozen
  // parameters stay where the module keeps them, whole on every rank.
  std::vector<at::Tensor> frozen_params;
  std::vector<std::string> frozen_names;
  std::vector<zero::FlatGroup> frozen_groups;
  // Stage 3: the coordinator and the link the units' hooks reach it through.
  std::unique_ptr<zero::ParamCoordinator> coordinator;
  std::shared_ptr<zero::CoordinatorLink> link;
  // The objects a step runs through (each keeps its own state).
  std::unique_ptr<zero::GradReducer> reducer;
  std::unique_ptr<zero::ShardedOptimizer> optimizer;
  std::unique_ptr<LrScheduler> scheduler;

  // ---- Changed by training and by loading a checkpoint ----
  // The optimizer's param groups (EngineOptions::param_groups resolved;
  // members in the module's order, group_of indexed like `params`). A
  // resume may adopt the checkpoint's settings.
  ResolvedParamGroups param_groups;
  LossScaler scaler = LossScaler::Disabled();
  // DeepSpeed's counters.
  int64_t micro_steps = 0;
  int64_t global_steps = 0;  // optimizer steps, skipped ones included
  int64_t global_samples = 0;
  int64_t skipped_steps = 0;

  // ---- Made on first use by a checkpoint save or load ----
  // In-memory checkpoint copies (ZT_MEMORY_COPIES_DIR, engine/neighbour_copies.h);
  // null when off. Here, not in Checkpointer (whose objects live for one
  // call), because its worker thread and pair groups outlive a save.
  // Declared last: destroyed (its worker joined, its pair groups freed)
  // before the groups above.
  bool memory_copies_checked = false;
  std::shared_ptr<NeighbourCopies> memory_copies;

  // All-gathers every group that holds this rank's updated range of a full
  // buffer (stages 1/2; stage 3's persistent chunks). Collective; throws
  // zt::Error on a communication failure.
  void GatherParams();
  // Stage 3: the chunk holding `group` / whose shard is `shard` (-1: none,
  // or not stage 3).
  int ChunkOfGroup(const zero::FlatGroup* group) const;
  int ChunkOfShard(const at::Tensor& shard) const;
};

// Waits for `work`; a failure throws zt::Error with `what` in front.
void CheckWork(std::unique_ptr<comm::Work> work, const char* what);

}  // namespace zt
