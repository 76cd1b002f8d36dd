// The optimizer state's driven walks. The swapped store's descending walk (the update during
// backward, zero/optimizer_state.h): groups become ready from the last to
// the first at random moments, and non-blocking AdvanceWalk calls must
// visit only pieces whose groups are all ready, in descending group order,
// every element of every group exactly once, with the values the resident
// reference holds. Backward may finish the whole walk by itself (then the
// walk is closed, and the step has nothing left) or leave the rest to the
// blocking call.
#include "zero/optimizer_state.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "offload/io_engine.h"
#include "tests/offload/offload_test_util.h"
#include "tests/testing/scratch_dir.h"

namespace zt::zero {
namespace {

using Access = OptimizerState::Access;

// Groups of uneven sizes (one empty) across 1024-element sub-groups.
const std::vector<int64_t> kOwned = {700, 3000, 0, 1500, 2100, 333};
const std::vector<std::string> kKinds = {"exp_avg", "exp_avg_sq"};

// kOwned and kKinds swapped under `dir`, 2 of 8 sub-groups in buffers.
absl::StatusOr<std::unique_ptr<OptimizerState>> MakeSmallSwapped(const std::string& dir, offload::IoEngine* io) {
  offload::OptimizerSwapOptions o;
  o.dir = dir;
  o.sub_group_numel = 1024;
  o.buffer_count = 4;
  return MakeSwappedState(kKinds, kOwned, o, io);
}

// Every kind of every group of `state` equals `ref`'s.
void ExpectSameState(OptimizerState& state, OptimizerState& ref) {
  for (int k = 0; k < static_cast<int>(kKinds.size()); ++k) {
    for (int g = 0; g < static_cast<int>(kOwned.size()); ++g) {
      const int64_t n = kOwned[static_cast<size_t>(g)];
      std::vector<float> got(static_cast<size_t>(n)), want(static_cast<size_t>(n));
      ASSERT_TRUE(state.Read(k, g, 0, n, got.data()).ok());
      ASSERT_TRUE(ref.Read(k, g, 0, n, want.data()).ok());
      ASSERT_EQ(got, want) << "kind " << k << " group " << g;
    }
  }
}

TEST(OptimizerStateWalk, VisitsReadyPiecesDownwardEveryElementOnce) {
  zt::testing::ScratchDir dir("zt_optstate");
  ZT_ENGINE_OR_SKIP(io, offload::IoOptions{});
  const std::vector<int64_t>& owned = kOwned;
  const std::vector<std::string>& kinds = kKinds;
  auto swapped = MakeSmallSwapped(dir.path(), io.get());
  ASSERT_TRUE(swapped.ok()) << swapped.status();
  OptimizerState& state = **swapped;
  ASSERT_TRUE(state.CanWalkAhead());
  std::unique_ptr<OptimizerState> ref = MakeResidentState(kinds, owned);
  EXPECT_FALSE(ref->CanWalkAhead());
  const int groups = static_cast<int>(owned.size());

  std::mt19937_64 rng(11);
  for (int walk = 0; walk < 8; ++walk) {
    SCOPED_TRACE(absl::StrCat("walk ", walk));
    // The reference update of this walk, applied group by group.
    auto update = [&](int g, int64_t b, int64_t e, float* const* data) {
      for (int64_t i = b; i < e; ++i) {
        for (int k = 0; k < 2; ++k)
          data[k][i - b] = data[k][i - b] * 0.5f + static_cast<float>((g * 31 + i + k + walk) % 97);
      }
      return absl::OkStatus();
    };
    ASSERT_TRUE(ref->ForEachPiece(Access::kReadWrite, update).ok());

    std::vector<std::vector<int>> seen(owned.size());
    for (size_t g = 0; g < owned.size(); ++g) seen[g].assign(static_cast<size_t>(owned[g]), 0);
    int ready = groups;  // groups >= ready are final
    int last_group = groups;
    std::string problem;
    auto visit = [&](int g, int64_t b, int64_t e, float* const* data) {
      if (g < ready) problem = absl::StrCat("group ", g, " visited before it was ready (", ready, ")");
      if (g > last_group) problem = absl::StrCat("group ", g, " after group ", last_group);
      last_group = g;
      for (int64_t i = b; i < e; ++i) ++seen[static_cast<size_t>(g)][static_cast<size_t>(i)];
      return update(g, b, e, data);
    };
    ASSERT_TRUE(state.BeginWalk(/*descending=*/true).ok());
    const bool finish_in_backward = walk % 2 == 1;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (state.walk_open() && (ready > 0 || finish_in_backward)) {
      ASSERT_LT(std::chrono::steady_clock::now(), give_up) << "non-blocking calls made no progress";
      if (ready > 0 && rng() % 2 == 0) --ready;
      if (rng() % 2 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
      ASSERT_TRUE(state.AdvanceWalk(ready, OptimizerState::Wait::kNever, visit).ok());
      ASSERT_EQ(problem, "");
    }
    if (state.walk_open()) {
      ASSERT_TRUE(state.AdvanceWalk(0, OptimizerState::Wait::kToEnd, visit).ok());
    }
    ASSERT_FALSE(state.walk_open());
    ASSERT_EQ(problem, "");
    for (size_t g = 0; g < owned.size(); ++g) {
      for (size_t i = 0; i < seen[g].size(); ++i) ASSERT_EQ(seen[g][i], 1) << "group " << g << " element " << i;
    }
    ASSERT_NO_FATAL_FAILURE(ExpectSameState(state, *ref));
  }
}

// The ascending walk (the update at gather): the forward asks for groups
// up to a bound that grows at random; a kForReady call must visit exactly
// the groups below it (waiting for their I/O), in ascending order, and stop
// there; kToEnd finishes. Consecutive walks all go up, through a pool that
// holds 2 of 8 sub-groups; the resident store runs the same walks.
TEST(OptimizerStateWalk, AscendingWalkVisitsExactlyTheGroupsAskedFor) {
  zt::testing::ScratchDir dir("zt_optstate_up");
  ZT_ENGINE_OR_SKIP(io, offload::IoOptions{});
  const std::vector<int64_t>& owned = kOwned;
  const std::vector<std::string>& kinds = kKinds;
  auto swapped = MakeSmallSwapped(dir.path(), io.get());
  ASSERT_TRUE(swapped.ok()) << swapped.status();
  std::unique_ptr<OptimizerState> resident = MakeResidentState(kinds, owned);
  std::unique_ptr<OptimizerState> ref = MakeResidentState(kinds, owned);
  const int groups = static_cast<int>(owned.size());

  std::mt19937_64 rng(23);
  for (int walk = 0; walk < 6; ++walk) {
    SCOPED_TRACE(absl::StrCat("walk ", walk));
    auto update = [&](int g, int64_t b, int64_t e, float* const* data) {
      for (int64_t i = b; i < e; ++i) {
        for (int k = 0; k < 2; ++k)
          data[k][i - b] = data[k][i - b] * 0.5f + static_cast<float>((g * 17 + i + 3 * k + walk) % 89);
      }
      return absl::OkStatus();
    };
    ASSERT_TRUE(ref->ForEachPiece(Access::kReadWrite, update).ok());
    for (OptimizerState* state : {swapped->get(), resident.get()}) {
      std::vector<std::vector<int>> seen(owned.size());
      for (size_t g = 0; g < owned.size(); ++g) seen[g].assign(static_cast<size_t>(owned[g]), 0);
      int bound = 0;
      int last_group = -1;
      std::string problem;
      auto visit = [&](int g, int64_t b, int64_t e, float* const* data) {
        if (g >= bound) problem = absl::StrCat("group ", g, " visited before it was asked for (bound ", bound, ")");
        if (g < last_group) problem = absl::StrCat("group ", g, " after group ", last_group);
        last_group = g;
        for (int64_t i = b; i < e; ++i) ++seen[static_cast<size_t>(g)][static_cast<size_t>(i)];
        return update(g, b, e, data);
      };
      ASSERT_TRUE(state->BeginWalk(/*descending=*/false).ok());
      while (bound < groups) {
        bound = std::min(groups, bound + 1 + static_cast<int>(rng() % 2));
        if (bound == groups) break;
        ASSERT_TRUE(state->AdvanceWalk(bound, OptimizerState::Wait::kForReady, visit).ok());
        ASSERT_EQ(problem, "");
        // Every group below the bound is complete, none above it touched.
        for (int g = 0; g < groups; ++g) {
          for (size_t i = 0; i < seen[static_cast<size_t>(g)].size(); ++i) {
            ASSERT_EQ(seen[static_cast<size_t>(g)][i], g < bound ? 1 : 0) << "group " << g << " element " << i;
          }
        }
        ASSERT_TRUE(state->walk_open());
      }
      ASSERT_TRUE(state->AdvanceWalk(groups, OptimizerState::Wait::kToEnd, visit).ok());
      ASSERT_FALSE(state->walk_open());
      ASSERT_EQ(problem, "");
      for (size_t g = 0; g < owned.size(); ++g) {
        for (size_t i = 0; i < seen[g].size(); ++i) ASSERT_EQ(seen[g][i], 1) << "group " << g << " element " << i;
      }
      ASSERT_NO_FATAL_FAILURE(ExpectSameState(*state, *ref));
    }
  }
}

}  // namespace
}  // namespace zt::zero
