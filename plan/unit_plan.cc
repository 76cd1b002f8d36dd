// Implementation of plan/unit_plan.h.
#include "plan/unit_plan.h"

#include "util/status.h"

namespace zt::plan {

std::vector<ChunkLayout> PlanUnitChunks(const std::vector<UnitParam>& params, int64_t bucket_numel, int partitions,
                                        const PersistencePolicy& policy, bool all_persistent,
                                        int64_t* persistent_used) {
  ZT_CHECK(persistent_used != nullptr);
  // Four classes: (trainable, persistent) in a fixed order.
  std::vector<UnitParam> classes[2][2];
  for (const UnitParam& p : params) {
    bool persistent = all_persistent;
    if (!persistent && p.numel <= policy.param_threshold && *persistent_used <= policy.model_threshold - p.numel) {
      persistent = true;
    }
    if (persistent) *persistent_used += p.numel;
    classes[p.trainable ? 0 : 1][persistent ? 1 : 0].push_back(p);
  }

  std::vector<ChunkLayout> chunks;
  for (int t = 0; t < 2; ++t) {
    for (int s = 0; s < 2; ++s) {
      const std::vector<UnitParam>& members = classes[t][s];
      if (members.empty()) continue;
      std::vector<ParamInfo> infos(members.size());
      for (size_t i = 0; i < members.size(); ++i) infos[i].numel = members[i].numel;
      Layout layout = PlanLayout(infos, bucket_numel, partitions);
      for (GroupLayout& g : layout.groups) {
        for (ParamSlot& slot : g.slots) slot.param_index = members[static_cast<size_t>(slot.param_index)].param_index;
        ChunkLayout c;
        c.layout = std::move(g);
        c.trainable = t == 0;
        c.persistent = s == 1;
        chunks.push_back(std::move(c));
      }
    }
  }
  return chunks;
}

}  // namespace zt::plan
