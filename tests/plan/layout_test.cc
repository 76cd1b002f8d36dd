// Layout math: grouping by bucket size, padding, shard ranges, intersections.
#include "plan/layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace zt::plan {
namespace {

std::vector<ParamInfo> Params(const std::vector<int64_t>& sizes) {
  std::vector<ParamInfo> out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    ParamInfo p;
    p.name = "p" + std::to_string(i);
    p.shape = {sizes[i]};
    p.numel = sizes[i];
    out.push_back(p);
  }
  return out;
}

TEST(PlanLayout, OneGroupWhenBucketIsLarge) {
  Layout l = PlanLayout(Params({10, 20, 3}), 1000, 4);
  ASSERT_EQ(l.groups.size(), 1u);
  const GroupLayout& g = l.groups[0];
  EXPECT_EQ(g.numel, 33);
  EXPECT_EQ(g.padded_numel, 40);  // multiple of 2 * 4
  EXPECT_EQ(g.shard_numel, 10);
  ASSERT_EQ(g.slots.size(), 3u);
  // Model order inside the group, contiguous offsets.
  EXPECT_EQ(g.slots[0].param_index, 0);
  EXPECT_EQ(g.slots[0].offset, 0);
  EXPECT_EQ(g.slots[1].offset, 10);
  EXPECT_EQ(g.slots[2].offset, 30);
}

TEST(PlanLayout, GroupsFillBackwardsAndOversizeParamsStandAlone) {
  // Backward order is 5, 4, 3, 2, 1, 0; bucket 25: 10 + 10 + 5 = 25 fills
  // group 0, the 100-element parameter stands alone, then 10 + 10.
  Layout l = PlanLayout(Params({10, 10, 100, 5, 10, 10}), 25, 2);
  ASSERT_EQ(l.groups.size(), 3u);
  auto indices = [&](int g) {
    std::vector<int> v;
    for (const ParamSlot& s : l.groups[static_cast<size_t>(g)].slots) v.push_back(s.param_index);
    return v;
  };
  EXPECT_EQ(indices(0), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(l.groups[0].numel, 25);
  EXPECT_EQ(l.groups[0].padded_numel, 28);
  EXPECT_EQ(indices(1), (std::vector<int>{2}));
  EXPECT_EQ(l.groups[1].numel, 100);
  EXPECT_EQ(indices(2), (std::vector<int>{0, 1}));
}

TEST(PlanLayout, EveryParameterExactlyOnceAndShardsTile) {
  std::vector<int64_t> sizes = {7, 1, 300, 13, 13, 64, 2, 999, 5};
  for (int partitions : {1, 2, 3, 4, 7}) {
    for (int64_t bucket : {1, 16, 100, 1000, 100000}) {
      Layout l = PlanLayout(Params(sizes), bucket, partitions);
      std::vector<int> seen(sizes.size(), 0);
      for (const GroupLayout& g : l.groups) {
        int64_t expect_offset = 0;
        for (const ParamSlot& s : g.slots) {
          ++seen[static_cast<size_t>(s.param_index)];
          EXPECT_EQ(s.offset, expect_offset);
          EXPECT_EQ(s.numel, sizes[static_cast<size_t>(s.param_index)]);
          expect_offset += s.numel;
        }
        EXPECT_EQ(g.numel, expect_offset);
        EXPECT_GE(g.padded_numel, g.numel);
        EXPECT_EQ(g.padded_numel % (2 * partitions), 0);
        EXPECT_LT(g.padded_numel - g.numel, 2 * partitions + (g.numel == 0 ? 2 * partitions : 0));
        EXPECT_EQ(g.shard_numel * partitions, g.padded_numel);
        EXPECT_EQ(g.ShardEnd(partitions - 1), g.padded_numel);
        if (bucket >= 1000 && g.numel > 0) {
          EXPECT_LE(g.numel, std::max<int64_t>(bucket, 999));
        }
      }
      for (int c : seen) EXPECT_EQ(c, 1);
      EXPECT_EQ(l.total_numel(), std::accumulate(sizes.begin(), sizes.end(), int64_t{0}));
    }
  }
}

TEST(Intersect, ClipsToRange) {
  ParamSlot s;
  s.offset = 10;
  s.numel = 20;  // [10, 30)
  EXPECT_TRUE(Intersect(s, 0, 10).empty());
  EXPECT_TRUE(Intersect(s, 30, 40).empty());
  SlotRange r = Intersect(s, 0, 15);
  EXPECT_EQ(r.begin_in_param, 0);
  EXPECT_EQ(r.end_in_param, 5);
  r = Intersect(s, 12, 25);
  EXPECT_EQ(r.begin_in_param, 2);
  EXPECT_EQ(r.end_in_param, 15);
  r = Intersect(s, 25, 100);
  EXPECT_EQ(r.begin_in_param, 15);
  EXPECT_EQ(r.end_in_param, 20);
}

// The one padding rule every flat buffer follows (and that the checkpoint
// tools and the estimate now call instead of restating).
TEST(PaddedNumel, MultipleOfTwiceThePartitionsAndNeverEmpty) {
  EXPECT_EQ(PaddedNumel(33, 4), 40);
  EXPECT_EQ(PaddedNumel(40, 4), 40);
  EXPECT_EQ(PaddedNumel(0, 4), 8);
  EXPECT_EQ(PaddedNumel(1, 1), 2);
  EXPECT_EQ(PaddedNumel(7, 3), 12);
  for (int parts : {1, 2, 3, 5, 8}) {
    for (int64_t n : {0, 1, 9, 100, 1001}) {
      const int64_t p = PaddedNumel(n, parts);
      EXPECT_EQ(p % (2 * parts), 0);
      EXPECT_GE(p, n);
      EXPECT_LT(p - std::max<int64_t>(n, 1), 2 * parts);
    }
  }
  // PlanLayout pads with it.
  Layout l = PlanLayout(Params({10, 20, 3}), 1000, 3);
  EXPECT_EQ(l.groups[0].padded_numel, PaddedNumel(33, 3));
}

// DeepSpeed's stage-3 rule: ceil(numel / world) per rank, per parameter.
TEST(PerParamShardNumel, CeilOfTheShare) {
  EXPECT_EQ(PerParamShardNumel(10, 3), 4);
  EXPECT_EQ(PerParamShardNumel(9, 3), 3);
  EXPECT_EQ(PerParamShardNumel(1, 4), 1);
  EXPECT_EQ(PerParamShardNumel(0, 2), 0);
  EXPECT_EQ(PerParamShardNumel(7, 1), 7);
}

}  // namespace
}  // namespace zt::plan
