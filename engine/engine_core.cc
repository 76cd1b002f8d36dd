// Implementation of engine/engine_core.h.
#include "engine/engine_core.h"

#include "absl/strings/str_cat.h"
#include "comm/collective_label.h"
#include "util/error.h"

namespace zt {

void CheckWork(std::unique_ptr<comm::Work> work, const char* what) {
  absl::Status st = work->Wait();
  if (!st.ok()) throw Error(absl::Status(st.code(), absl::StrCat(what, ": ", st.message())));
}

void EngineCore::GatherParams() {
  std::vector<std::unique_ptr<comm::Work>> works;
  works.reserve(groups.size());
  comm::CollectiveLabel label("updated parameters after the optimizer step");
  for (zero::FlatGroup& g : groups) {
    // Stage 3 gathers sharded chunks on demand; only persistent ones (which
    // own a slice of their live buffer) are refreshed here.
    if (g.param_residency == zero::ParamResidency::kShardOnly) continue;
    works.push_back(shard_pg->AllGather(g.OwnedParams(), g.params));
  }
  for (auto& w : works) CheckWork(std::move(w), "all-gathering updated parameters");
}

int EngineCore::ChunkOfGroup(const zero::FlatGroup* group) const {
  if (!coordinator) return -1;
  const auto& chunks = coordinator->chunks();
  for (size_t c = 0; c < chunks.size(); ++c) {
    if (chunks[c].group == group) return static_cast<int>(c);
  }
  return -1;
}

int EngineCore::ChunkOfShard(const at::Tensor& shard) const {
  if (!coordinator) return -1;
  const auto& chunks = coordinator->chunks();
  for (size_t c = 0; c < chunks.size(); ++c) {
    const zero::FlatGroup& g = *chunks[c].group;
    if (g.param_residency == zero::ParamResidency::kShardOnly && g.param_shard.is_same(shard)) {
      return static_cast<int>(c);
    }
  }
  return -1;
}

}  // namespace zt
