// Implementation of plan/layout.h.
#include "plan/layout.h"

#include <algorithm>

#include "util/status.h"

namespace zt::plan {

int64_t Layout::total_numel() const {
  int64_t n = 0;
  for (const GroupLayout& g : groups) n += g.numel;
  return n;
}

int64_t PaddedNumel(int64_t numel, int partitions) {
  const int64_t alignment = 2 * static_cast<int64_t>(partitions);
  return std::max<int64_t>(alignment, (numel + alignment - 1) / alignment * alignment);
}

int64_t PerParamShardNumel(int64_t numel, int partitions) {
  const int64_t n = static_cast<int64_t>(partitions);
  return (numel + n - 1) / n;
}

Layout PlanLayout(const std::vector<ParamInfo>& params, int64_t bucket_numel, int partitions) {
  ZT_CHECK(bucket_numel > 0);
  ZT_CHECK(partitions >= 1);
  Layout layout;
  layout.partitions = partitions;

  // Walk backwards, closing a group when the next parameter would overflow it.
  std::vector<std::vector<int>> members;
  int64_t current = 0;
  for (int i = static_cast<int>(params.size()) - 1; i >= 0; --i) {
    const int64_t n = params[static_cast<size_t>(i)].numel;
    if (members.empty() || (current > 0 && current + n > bucket_numel)) {
      members.emplace_back();
      current = 0;
    }
    members.back().push_back(i);
    current += n;
  }

  for (std::vector<int>& m : members) {
    // Inside a group keep the model's own order, so the flat buffer reads
    // like the module's state dict.
    std::sort(m.begin(), m.end());
    GroupLayout g;
    for (int index : m) {
      ParamSlot slot;
      slot.param_index = index;
      slot.offset = g.numel;
      slot.numel = params[static_cast<size_t>(index)].numel;
      g.numel += slot.numel;
      g.slots.push_back(slot);
    }
    g.padded_numel = PaddedNumel(g.numel, partitions);
    g.shard_numel = g.padded_numel / partitions;
    layout.groups.push_back(std::move(g));
  }
  return layout;
}

SlotRange Intersect(const ParamSlot& slot, int64_t begin, int64_t end) {
  SlotRange r;
  const int64_t lo = std::max(begin, slot.offset);
  const int64_t hi = std::min(end, slot.offset + slot.numel);
  if (lo < hi) {
    r.begin_in_param = lo - slot.offset;
    r.end_in_param = hi - slot.offset;
  }
  return r;
}

}  // namespace zt::plan
