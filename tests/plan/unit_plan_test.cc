// PlanUnitChunks: classes never mix, persistence follows DeepSpeed's two
// thresholds, chunks respect the bucket size and pad to 2 x ranks.
#include "plan/unit_plan.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace zt::plan {
namespace {

std::vector<UnitParam> Params(const std::vector<std::pair<int64_t, bool>>& sizes) {
  std::vector<UnitParam> out;
  for (size_t i = 0; i < sizes.size(); ++i) out.push_back({static_cast<int>(i) + 100, sizes[i].first, sizes[i].second});
  return out;
}

TEST(UnitPlanTest, EveryParameterInExactlyOneChunkOfItsClass) {
  const auto params = Params({{1000, true}, {10, true}, {500, false}, {8, false}, {3000, true}});
  PersistencePolicy policy;
  policy.param_threshold = 16;
  int64_t used = 0;
  for (int ranks : {1, 2, 3, 4}) {
    used = 0;
    std::vector<ChunkLayout> chunks = PlanUnitChunks(params, 2000, ranks, policy, false, &used);
    std::multiset<int> seen;
    for (const ChunkLayout& c : chunks) {
      EXPECT_EQ(c.layout.padded_numel % (2 * ranks), 0);
      EXPECT_EQ(c.layout.shard_numel * ranks, c.layout.padded_numel);
      for (const ParamSlot& s : c.layout.slots) {
        seen.insert(s.param_index);
        const UnitParam& p = params[static_cast<size_t>(s.param_index - 100)];
        EXPECT_EQ(c.trainable, p.trainable) << s.param_index;
        EXPECT_EQ(c.persistent, p.numel <= 16) << s.param_index;
        EXPECT_EQ(s.numel, p.numel);
      }
    }
    EXPECT_EQ(seen, (std::multiset<int>{100, 101, 102, 103, 104}));
    EXPECT_EQ(used, 18);
  }
}

TEST(UnitPlanTest, BucketSizeSplitsLargeClasses) {
  const auto params = Params({{800, true}, {800, true}, {800, true}, {5000, true}});
  int64_t used = 0;
  std::vector<ChunkLayout> chunks = PlanUnitChunks(params, 1700, 2, PersistencePolicy(), false, &used);
  // 5000 alone (larger than the bucket), then 800+800 and 800.
  ASSERT_EQ(chunks.size(), 3u);
  for (const ChunkLayout& c : chunks) EXPECT_TRUE(c.layout.numel <= 1700 || c.layout.slots.size() == 1);
}

TEST(UnitPlanTest, ModelThresholdCapsPersistentTotal) {
  const auto params = Params({{10, true}, {10, true}, {10, true}});
  PersistencePolicy policy;
  policy.param_threshold = 100;
  policy.model_threshold = 25;
  int64_t used = 0;
  std::vector<ChunkLayout> chunks = PlanUnitChunks(params, 1000, 2, policy, false, &used);
  int64_t persistent = 0;
  for (const ChunkLayout& c : chunks) {
    if (c.persistent) persistent += c.layout.numel;
  }
  EXPECT_EQ(persistent, 20);
  EXPECT_EQ(used, 20);
  // The budget carries over to the next unit.
  chunks = PlanUnitChunks(Params({{5, true}, {6, true}}), 1000, 2, policy, false, &used);
  EXPECT_EQ(used, 25);
}

TEST(UnitPlanTest, AllPersistentForTheRoot) {
  int64_t used = 0;
  std::vector<ChunkLayout> chunks = PlanUnitChunks(Params({{100000, true}, {7, false}}), 1 << 20, 4,
                                                   PersistencePolicy(), /*all_persistent=*/true, &used);
  ASSERT_EQ(chunks.size(), 2u);
  for (const ChunkLayout& c : chunks) EXPECT_TRUE(c.persistent);
}

}  // namespace
}  // namespace zt::plan
