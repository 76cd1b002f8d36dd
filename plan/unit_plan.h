// Stage-3 partitioning math for one sharding unit: which of its parameters
// share a chunk (a flat buffer that is gathered, released and reduced as one
// piece), and which chunks stay gathered for good ("persistent").
//
// Pure functions over sizes, like plan/layout.h (which they reuse), so the
// checkpoint code and the memory estimate replay them for any world size.
//
// Rules:
//  * trainable and frozen parameters never share a chunk (frozen ones have no
//    gradient and no optimizer state), nor do persistent and sharded ones;
//  * a parameter is persistent when its numel is at most
//    stage3_param_persistence_threshold and the persistent total planned so
//    far stays within stage3_model_persistence_threshold (DeepSpeed's rules),
//    or when the whole unit is persistent (the root unit when the model's top
//    module is not a unit: nothing tells us when its parameters are used);
//  * each class is cut into chunks of about reduce_bucket_size elements
//    (PlanLayout), padded to a multiple of 2 x ranks, in model order.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "plan/layout.h"

namespace zt::plan {

struct UnitParam {
  int param_index = 0;  // index in the engine's parameter list
  int64_t numel = 0;
  bool trainable = true;
};

struct PersistencePolicy {
  int64_t param_threshold = 0;
  int64_t model_threshold = std::numeric_limits<int64_t>::max();
};

struct ChunkLayout {
  GroupLayout layout;  // slots' param_index are the UnitParam::param_index values
  bool trainable = true;
  bool persistent = false;
};

// Plans the chunks of one unit. `persistent_used` (in/out) is the persistent
// numel planned so far across the model.
std::vector<ChunkLayout> PlanUnitChunks(const std::vector<UnitParam>& params, int64_t bucket_numel, int partitions,
                                        const PersistencePolicy& policy, bool all_persistent, int64_t* persistent_used);

}  // namespace zt::plan
