// Sub-groups of a Gloo world (ProcessGroup::NewSubGroup): pairs and
// cross-pairs of 4 ranks reduce and gather only among their members, with
// their own byte counters and the world's untouched; one-rank sub-groups are
// single groups that keep their world rank; bad rank lists are named; ranks
// that made their sub-groups in different orders are refused; a dead
// member's peer gets an error naming it by its world rank. The layout helpers
// (NodeLocalRanks, CrossNodeRanks) are checked without ranks.
#include "comm/sub_group.h"

#include <ATen/ATen.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/init.h"
#include "comm/shard_groups.h"
#include "comm/two_hop_gather.h"
#include "gtest/gtest.h"
#include "launch/rank_env.h"
#include "tests/testing/ranks.h"
#include "util/status.h"

namespace {

using zt::comm::ProcessGroup;
using zt::comm::ReduceOp;

absl::StatusOr<std::shared_ptr<ProcessGroup>> World() {
  ZT_ASSIGN_OR_RETURN(zt::comm::RankEnv env, zt::comm::ReadRankEnv());
  zt::comm::GroupOptions options;
  options.timeout = std::chrono::seconds(30);
  return zt::comm::InitProcessGroup(env, options);
}

absl::Status Expect(bool ok, const std::string& what) { return ok ? absl::OkStatus() : absl::InternalError(what); }

// Sums, gathers and reduce-scatters in `g` (whose members' world ranks are
// `members`), each rank contributing values made of its world rank.
absl::Status CheckCollectives(ProcessGroup& g, const std::vector<int>& members, int world_rank) {
  ZT_RETURN_IF_ERROR(
      Expect(g.world_ranks() == members, absl::StrCat("world_ranks [", absl::StrJoin(g.world_ranks(), ","), "], want [",
                                                      absl::StrJoin(members, ","), "]")));
  ZT_RETURN_IF_ERROR(Expect(members[g.rank()] == world_rank, "group rank does not match the world rank"));
  const int n = g.size();
  at::Tensor t = at::full({5}, static_cast<float>(world_rank + 1));
  ZT_RETURN_IF_ERROR(g.AllReduce(t, ReduceOp::kSum)->Wait());
  float want = 0;
  for (int m : members) want += static_cast<float>(m + 1);
  ZT_RETURN_IF_ERROR(
      Expect(at::all(t == want).item<bool>(), absl::StrCat("all-reduce gave ", t[0].item<float>(), ", want ", want)));
  at::Tensor flat = at::zeros({3 * n});
  at::Tensor shard = at::full({3}, static_cast<float>(world_rank));
  ZT_RETURN_IF_ERROR(g.AllGather(shard, flat)->Wait());
  for (int r = 0; r < n; ++r) {
    ZT_RETURN_IF_ERROR(Expect(at::all(flat.narrow(0, 3 * r, 3) == static_cast<float>(members[r])).item<bool>(),
                              absl::StrCat("all-gather slot ", r, " is not world rank ", members[r], "'s")));
  }
  at::Tensor full = at::arange(2 * n, at::kFloat) + static_cast<float>(world_rank);
  at::Tensor mine = at::zeros({2});
  ZT_RETURN_IF_ERROR(g.ReduceScatter(full, mine, ReduceOp::kSum)->Wait());
  for (int i = 0; i < 2; ++i) {
    float sum = 0;
    for (int m : members) sum += static_cast<float>(2 * g.rank() + i + m);
    ZT_RETURN_IF_ERROR(Expect(mine[i].item<float>() == sum, absl::StrCat("reduce-scatter element ", i, " is ",
                                                                         mine[i].item<float>(), ", want ", sum)));
  }
  return absl::OkStatus();
}

ZT_RANK_WORKER(sub_groups) {
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<ProcessGroup> world, World());
  const int me = world->rank();
  // Every rank makes every sub-group, in the same order; non-members get null.
  const std::vector<std::vector<int>> lists = {{0, 1}, {2, 3}, {0, 2}, {1, 3}};
  std::vector<std::shared_ptr<ProcessGroup>> groups;
  for (const auto& list : lists) {
    ZT_ASSIGN_OR_RETURN(std::shared_ptr<ProcessGroup> g, world->NewSubGroup(list));
    const bool member = std::find(list.begin(), list.end(), me) != list.end();
    ZT_RETURN_IF_ERROR(Expect((g != nullptr) == member,
                              absl::StrCat("rank ", me, " membership of [", absl::StrJoin(list, ","), "] is wrong")));
    groups.push_back(std::move(g));
  }
  world->ResetStats();
  for (size_t i = 0; i < lists.size(); ++i) {
    if (groups[i] == nullptr) continue;
    groups[i]->ResetStats();
    ZT_RETURN_IF_ERROR(CheckCollectives(*groups[i], lists[i], me));
    // Each pair's bytes are its own: 5 floats all-reduced between 2 ranks send
    // 2 (n-1)/n * 20 bytes = 20, the gather 12, the reduce-scatter 8.
    const zt::comm::CommStats s = groups[i]->stats();
    ZT_RETURN_IF_ERROR(Expect(s.total_bytes_sent() == 20 + 12 + 8,
                              absl::StrCat("sub-group sent ", s.total_bytes_sent(), " bytes, want 40")));
  }
  ZT_RETURN_IF_ERROR(Expect(world->stats().total_bytes_sent() == 0, "sub-group traffic was counted by the world"));
  // One-rank sub-groups: single groups that keep the world rank.
  for (int r = 0; r < world->size(); ++r) {
    ZT_ASSIGN_OR_RETURN(std::shared_ptr<ProcessGroup> one, world->NewSubGroup({r}));
    if (r != me) continue;
    ZT_RETURN_IF_ERROR(Expect(one != nullptr && one->size() == 1 && one->world_ranks() == std::vector<int>{me},
                              "a one-rank sub-group does not know its world rank"));
    ZT_RETURN_IF_ERROR(CheckCollectives(*one, {me}, me));
  }
  // A sub-group of a sub-group maps to world ranks through both.
  if (groups[1] != nullptr) {  // ranks 2 and 3
    ZT_ASSIGN_OR_RETURN(std::shared_ptr<ProcessGroup> nested, groups[1]->NewSubGroup({0, 1}));
    ZT_RETURN_IF_ERROR(CheckCollectives(*nested, {2, 3}, me));
  }
  if (groups[0] != nullptr) {  // ranks 0 and 1
    ZT_ASSIGN_OR_RETURN(std::shared_ptr<ProcessGroup> nested, groups[0]->NewSubGroup({0, 1}));
    ZT_RETURN_IF_ERROR(CheckCollectives(*nested, {0, 1}, me));
  }
  // Bad lists are named, on every rank alike, and number no sub-group.
  for (const std::vector<int>& bad : std::vector<std::vector<int>>{{}, {1, 0}, {2, 2}, {0, 4}, {-1}}) {
    absl::StatusOr<std::shared_ptr<ProcessGroup>> g = world->NewSubGroup(bad);
    ZT_RETURN_IF_ERROR(Expect(!g.ok() && g.status().code() == absl::StatusCode::kInvalidArgument,
                              absl::StrCat("[", absl::StrJoin(bad, ","), "] was accepted")));
    std::printf("rank %d: [%s]: %s\n", me, absl::StrJoin(bad, ",").c_str(), std::string(g.status().message()).c_str());
  }
  // The world still works after all of it.
  ZT_RETURN_IF_ERROR(CheckCollectives(*world, {0, 1, 2, 3}, me));
  for (auto& g : groups) g.reset();  // sub-groups go before the world
  return absl::OkStatus();
}

TEST(SubGroups, PairsAndCrossPairsOfFourRanks) {
  auto result = zt::testing::RunRanks("sub_groups", {.world_size = 4});
  EXPECT_TRUE(result.ok()) << result.Summary();
  EXPECT_TRUE(absl::StrContains(result.outputs[0], "must be ascending without repeats")) << result.outputs[0];
  EXPECT_TRUE(absl::StrContains(result.outputs[0], "rank 4 is outside the group of 4 ranks")) << result.outputs[0];
}

// Rank 2 makes its sub-groups in another order than ranks 0 and 1: its first
// call, [0, 2], meets ranks 0 and 1's first, [0, 1], under the same number.
// Rank 2 gets an error naming both lists instead of a group connected to the
// wrong ranks; ranks 0 and 1 get their pair, which works.
ZT_RANK_WORKER(sub_groups_out_of_order) {
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<ProcessGroup> world, World());
  const int me = world->rank();
  if (me == 2) {
    absl::StatusOr<std::shared_ptr<ProcessGroup>> g = world->NewSubGroup({0, 2});
    std::printf("rank 2: %s\n", g.status().ToString().c_str());
    ZT_RETURN_IF_ERROR(Expect(!g.ok() && g.status().code() == absl::StatusCode::kInvalidArgument &&
                                  absl::StrContains(g.status().message(), "[0, 2]") &&
                                  absl::StrContains(g.status().message(), "[0, 1]"),
                              absl::StrCat("mismatched sub-group lists were not refused: ", g.status().ToString())));
  } else {
    ZT_ASSIGN_OR_RETURN(std::shared_ptr<ProcessGroup> pair, world->NewSubGroup({0, 1}));
    ZT_RETURN_IF_ERROR(CheckCollectives(*pair, {0, 1}, me));
  }
  ZT_RETURN_IF_ERROR(world->Barrier()->Wait());
  return absl::OkStatus();
}

TEST(SubGroups, MembersThatMadeThemInAnotherOrderAreRefused) {
  auto result = zt::testing::RunRanks("sub_groups_out_of_order", {.world_size = 3});
  EXPECT_TRUE(result.ok()) << result.Summary();
  EXPECT_TRUE(absl::StrContains(result.outputs[2], "in the same order")) << result.outputs[2];
}

// Rank 3 dies after the pairs are made; rank 2, its pair's other member,
// gets an error naming it by its world rank, while ranks 0 and 1 keep using
// their own pair.
ZT_RANK_WORKER(sub_group_peer_dies) {
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<ProcessGroup> world, World());
  const int me = world->rank();
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<ProcessGroup> first, world->NewSubGroup({0, 1}));
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<ProcessGroup> second, world->NewSubGroup({2, 3}));
  ZT_RETURN_IF_ERROR(world->Barrier()->Wait());
  if (me == 3) ::raise(SIGKILL);
  if (me == 2) {
    at::Tensor t = at::ones({1000});
    absl::Status st = second->AllReduce(t, ReduceOp::kSum)->Wait();
    std::printf("rank 2: %s\n", st.ToString().c_str());
    std::FILE* done = std::fopen(ctx.arg.c_str(), "w");  // rank 0 may take the store down now
    if (done != nullptr) std::fclose(done);
    ZT_RETURN_IF_ERROR(
        Expect(!st.ok() && absl::StrContains(st.message(), "rank 3") && absl::StrContains(st.message(), "on rank 2"),
               absl::StrCat("the error does not name world rank 3: ", st.ToString())));
    std::fflush(stdout);
    std::_Exit(0);  // the world has a dead member: leave without its shutdown
  }
  for (int i = 0; i < 20; ++i) ZT_RETURN_IF_ERROR(CheckCollectives(*first, {0, 1}, me));
  // Rank 0 hosts the store rank 2's diagnosis reads: stay until it is done.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (::access(ctx.arg.c_str(), F_OK) != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::fflush(stdout);
  std::_Exit(0);
}

TEST(SubGroups, ADeadMemberIsNamedByItsWorldRank) {
  const std::string done = absl::StrCat(::testing::TempDir(), "zt_sub_group_done_", ::getpid());
  std::remove(done.c_str());
  auto result = zt::testing::RunRanks("sub_group_peer_dies", {.world_size = 4, .arg = done, .may_fail_ranks = {3}});
  std::remove(done.c_str());
  EXPECT_TRUE(result.ok()) << result.Summary();
  EXPECT_TRUE(absl::StrContains(result.outputs[2], "peer rank 3")) << result.outputs[2];
}

zt::comm::RankEnv Env(int rank, int world, int local_rank, int local_world) {
  zt::comm::RankEnv env;
  env.rank = rank;
  env.world_size = world;
  env.local_rank = local_rank;
  env.local_world_size = local_world;
  return env;
}

// Hierarchical sharding's groups (comm/shard_groups.h) at 4 ranks, shard
// size 2: shard groups {0,1}, {2,3}; replica groups {0,2}, {1,3}; each works
// among its members. Shard size 4 (or -1) makes nothing; 3 is refused, naming
// the key on every rank.
ZT_RANK_WORKER(shard_groups) {
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<ProcessGroup> world, World());
  const int me = world->rank();
  ZT_ASSIGN_OR_RETURN(zt::comm::ShardGroups g, zt::comm::MakeShardGroups(world, 2, "mics_shard_size"));
  ZT_RETURN_IF_ERROR(Expect(g.shard != nullptr && g.replica != nullptr, "a rank got no shard or replica group"));
  ZT_RETURN_IF_ERROR(CheckCollectives(*g.shard, me < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3}, me));
  ZT_RETURN_IF_ERROR(CheckCollectives(*g.replica, me % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 3}, me));
  ZT_ASSIGN_OR_RETURN(zt::comm::ShardGroups only, zt::comm::MakeShardGroups(world, 2, "k", /*replicas=*/false));
  ZT_RETURN_IF_ERROR(Expect(only.shard != nullptr && only.replica == nullptr, "replicas=false made replica groups"));
  ZT_RETURN_IF_ERROR(CheckCollectives(*only.shard, me < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3}, me));
  for (int flat : {4, -1, 0}) {
    ZT_ASSIGN_OR_RETURN(zt::comm::ShardGroups f, zt::comm::MakeShardGroups(world, flat, "mics_shard_size"));
    ZT_RETURN_IF_ERROR(Expect(f.shard == world && f.replica == nullptr, absl::StrCat(flat, " made sub-groups")));
  }
  absl::StatusOr<zt::comm::ShardGroups> bad = zt::comm::MakeShardGroups(world, 3, "mics_shard_size");
  ZT_RETURN_IF_ERROR(Expect(!bad.ok() && absl::StrContains(bad.status().message(), "mics_shard_size is 3") &&
                                absl::StrContains(bad.status().message(), "does not divide the world of 4"),
                            absl::StrCat("shard size 3 of 4: ", bad.status().ToString())));
  // Still in step: the world works after the refusal (nothing was created).
  return CheckCollectives(*world, {0, 1, 2, 3}, me);
}

// The two-hop gather (comm/two_hop_gather.h) over 4 ranks as 2 hosts of 2:
// bitwise the one-hop all-gather, in bf16 and fp32, with three gathers in
// flight waited in reverse order (the second hops still go out in start
// order on every rank), and uneven shards falling back to one hop.
ZT_RANK_WORKER(two_hop_gather) {
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<ProcessGroup> world, World());
  const int me = world->rank();
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<zt::comm::TwoHopGather> hops, zt::comm::TwoHopGather::Create(world, 2));
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    std::vector<at::Tensor> want, got, shards;
    std::vector<std::unique_ptr<zt::comm::Work>> works;
    for (int64_t s : {1, 5, 1000}) {
      at::Tensor shard = (at::arange(s, at::kFloat) * 0.37f + 100.0f * me).to(dtype);
      at::Tensor one = at::empty({4 * s}, dtype), two = at::full({4 * s}, -1.0f, at::TensorOptions().dtype(dtype));
      ZT_RETURN_IF_ERROR(world->AllGather(shard, one)->Wait());
      shards.push_back(shard);
      want.push_back(one);
      got.push_back(two);
      works.push_back(hops->AllGather(shard, two));
    }
    for (size_t i = works.size(); i-- > 0;) ZT_RETURN_IF_ERROR(works[i]->Wait());
    for (size_t i = 0; i < want.size(); ++i) {
      ZT_RETURN_IF_ERROR(Expect(at::equal(want[i], got[i]), absl::StrCat("two-hop gather ", i, " differs")));
    }
  }
  // Uneven: 7 elements over 4 ranks (shards 2, 2, 2, 1): the one-hop path.
  at::Tensor flat = at::zeros({7}, at::kFloat);
  const int64_t b = zt::comm::ShardBegin(7, 4, me), e = zt::comm::ShardEnd(7, 4, me);
  at::Tensor shard = at::full({e - b}, static_cast<float>(me + 1));
  ZT_RETURN_IF_ERROR(hops->AllGather(shard, flat)->Wait());
  ZT_RETURN_IF_ERROR(Expect(flat[6].item<float>() == 4.0f && flat[0].item<float>() == 1.0f, "uneven gather"));
  ZT_RETURN_IF_ERROR(Expect(hops->stats().total_bytes_sent() > 0, "the hops counted no bytes"));
  absl::StatusOr<std::shared_ptr<zt::comm::TwoHopGather>> bad = zt::comm::TwoHopGather::Create(world, 3);
  ZT_RETURN_IF_ERROR(Expect(!bad.ok() && absl::StrContains(bad.status().message(), "to divide them"),
                            absl::StrCat("3 ranks per host of 4: ", bad.status().ToString())));
  return CheckCollectives(*world, {0, 1, 2, 3}, me);
}

TEST(TwoHopGather, EqualsTheOneHopGatherInAnyWaitOrder) {
  auto result = zt::testing::RunRanks("two_hop_gather", {.world_size = 4});
  EXPECT_TRUE(result.ok()) << result.Summary();
}

TEST(ShardGroups, ShardAndReplicaGroupsOfFourRanks) {
  auto result = zt::testing::RunRanks("shard_groups", {.world_size = 4});
  EXPECT_TRUE(result.ok()) << result.Summary();
  EXPECT_EQ(zt::comm::ShardGroupRanks(6, 3, 1), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(zt::comm::ReplicaGroupRanks(6, 3, 1), (std::vector<int>{1, 4}));
  EXPECT_EQ(zt::comm::ReplicaGroupRanks(6, 2, 0), (std::vector<int>{0, 2, 4}));
}

TEST(SubGroupLayout, NodeLocalAndCrossNodeRanks) {
  // 3 hosts x 2 ranks; rank 3 is host 1's second rank.
  EXPECT_EQ(zt::comm::NodeLocalRanks(Env(3, 6, 1, 2)).value(), (std::vector<int>{2, 3}));
  EXPECT_EQ(zt::comm::CrossNodeRanks(Env(3, 6, 1, 2)).value(), (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(zt::comm::NodeLocalRanks(Env(0, 4, 0, 4)).value(), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(zt::comm::CrossNodeRanks(Env(2, 4, 2, 4)).value(), (std::vector<int>{2}));
  absl::StatusOr<std::vector<int>> uneven = zt::comm::NodeLocalRanks(Env(0, 5, 0, 2));
  ASSERT_FALSE(uneven.ok());
  EXPECT_TRUE(absl::StrContains(uneven.status().message(), "not a whole number of hosts")) << uneven.status();
  absl::StatusOr<std::vector<int>> shuffled = zt::comm::CrossNodeRanks(Env(1, 4, 0, 2));
  ASSERT_FALSE(shuffled.ok());
  EXPECT_TRUE(absl::StrContains(shuffled.status().message(), "must be contiguous")) << shuffled.status();
}

}  // namespace

int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }
