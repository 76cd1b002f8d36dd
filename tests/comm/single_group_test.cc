// The single-rank backend: collective semantics without communication,
// counters, argument errors (which fail the group, as on Gloo), and
// InitProcessGroup's backend choice for a world of one.
#include "comm/single_group.h"

#include <ATen/ATen.h>

#include <memory>
#include <string>

#include "comm/collective_args.h"
#include "comm/init.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {

using ::testing::HasSubstr;
using zt::comm::CollectiveKind;
using zt::comm::ReduceOp;
using zt::comm::SingleGroup;

TEST(SingleGroup, CollectivesKeepTheirSemantics) {
  SingleGroup g;
  EXPECT_EQ(g.rank(), 0);
  EXPECT_EQ(g.size(), 1);
  EXPECT_EQ(g.backend_name(), "single");

  at::Tensor flat = at::zeros({5});
  at::Tensor shard = at::arange(5, at::kFloat);
  auto w = g.AllGather(shard, flat);
  EXPECT_TRUE(w->IsCompleted());
  EXPECT_TRUE(w->Wait().ok());
  EXPECT_TRUE(w->Wait().ok());
  EXPECT_TRUE(at::equal(flat, shard));
  EXPECT_TRUE(g.AllGather(flat, flat)->Wait().ok());  // in place
  EXPECT_TRUE(at::equal(flat, shard));

  at::Tensor out = at::empty({5});
  EXPECT_TRUE(g.ReduceScatter(flat, out, ReduceOp::kAvg)->Wait().ok());
  EXPECT_TRUE(at::equal(out, shard));

  at::Tensor t = at::arange(4, at::kLong);
  EXPECT_TRUE(g.AllReduce(t, ReduceOp::kSum)->Wait().ok());
  EXPECT_TRUE(at::equal(t, at::arange(4, at::kLong)));
  EXPECT_TRUE(g.Broadcast(t, 0)->Wait().ok());
  EXPECT_TRUE(g.Barrier()->Wait().ok());

  zt::comm::CommStats st = g.stats();
  EXPECT_EQ(st[CollectiveKind::kAllGather].calls, 2);
  EXPECT_EQ(st[CollectiveKind::kReduceScatter].calls, 1);
  EXPECT_EQ(st[CollectiveKind::kAllReduce].calls, 1);
  EXPECT_EQ(st[CollectiveKind::kBroadcast].calls, 1);
  EXPECT_EQ(st[CollectiveKind::kBarrier].calls, 1);
  EXPECT_EQ(st.total_bytes_sent(), 0);
  EXPECT_EQ(st.total_bytes_received(), 0);
  g.ResetStats();
  EXPECT_EQ(g.stats()[CollectiveKind::kAllGather].calls, 0);
}

struct BadCall {
  const char* name;
  std::function<std::unique_ptr<zt::comm::Work>(SingleGroup&)> call;
  const char* message;
};

TEST(SingleGroup, BadArgumentsAreNamedAndFailTheGroup) {
  const std::vector<BadCall> cases = {
      {"shard size", [](SingleGroup& g) { return g.AllGather(at::zeros({4}), at::zeros({5})); },
       "all_gather: `shard` has 4 elements but rank 0's shard of a 5-element flat buffer over 1 "
       "ranks has 5"},
      {"dtype mismatch", [](SingleGroup& g) { return g.AllGather(at::zeros({5}, at::kHalf), at::zeros({5})); },
       "all_gather: `shard` is fp16 but `flat` is fp32"},
      {"non-contiguous",
       [](SingleGroup& g) {
         return g.AllReduce(at::zeros({4, 4}).t(), ReduceOp::kSum);
       },
       "all_reduce: `tensor` is not contiguous"},
      {"undefined", [](SingleGroup& g) { return g.Broadcast(at::Tensor(), 0); },
       "broadcast: `tensor` is an undefined tensor"},
      {"root", [](SingleGroup& g) { return g.Broadcast(at::zeros({2}), 1); },
       "broadcast: root 1 is not a rank of this group (0..0)"},
      {"reduce-scatter max",
       [](SingleGroup& g) { return g.ReduceScatter(at::zeros({2}), at::zeros({2}), ReduceOp::kMax); },
       "reduce_scatter: op max is not supported (sum and avg only)"},
      {"integer avg", [](SingleGroup& g) { return g.AllReduce(at::zeros({2}, at::kLong), ReduceOp::kAvg); },
       "all_reduce: avg is defined for floating-point tensors only, not int64"},
      {"bool reduce", [](SingleGroup& g) { return g.AllReduce(at::zeros({2}, at::kBool), ReduceOp::kSum); },
       "all_reduce: cannot reduce bool tensors"},
  };
  for (const BadCall& c : cases) {
    SingleGroup g;
    absl::Status st = c.call(g)->Wait();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.name << ": " << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr(c.message)) << c.name;
    EXPECT_THAT(std::string(st.message()), HasSubstr("no longer usable")) << c.name;
    absl::Status later = g.Barrier()->Wait();
    EXPECT_EQ(later.code(), absl::StatusCode::kFailedPrecondition) << c.name;
    EXPECT_THAT(std::string(later.message()), HasSubstr("failed earlier")) << c.name;
  }
}

TEST(SingleGroup, ShardOverlappingFlatElsewhereIsRejected) {
  SingleGroup g;
  at::Tensor flat = at::zeros({10});
  absl::Status st = g.ReduceScatter(flat.narrow(0, 0, 10), flat, ReduceOp::kSum)->Wait();
  EXPECT_TRUE(st.ok()) << st;  // own slice: allowed
  // A 2-rank layout checked through the shared validator: rank 1's shard must
  // be flat[5, 10), not flat[4, 9).
  absl::Status bad =
      zt::comm::CheckReduceScatterArgs(flat, flat.narrow(0, 4, 5), ReduceOp::kSum, 1, 2, c10::DeviceType::CPU);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("overlaps `flat` but is not rank 1's slice"));
}

// All-to-all over one rank is a copy; the shared argument checks refuse
// blocks that do not divide, mismatched sizes and overlapping buffers.
TEST(SingleGroup, AllToAllCopiesAndRefusesBadBuffers) {
  {
    SingleGroup g;
    at::Tensor in = at::arange(6, at::kFloat), out = at::zeros({6});
    EXPECT_TRUE(g.AllToAll(in, out)->Wait().ok());
    EXPECT_TRUE(at::equal(in, out));
    EXPECT_EQ(g.stats()[CollectiveKind::kAllToAll].calls, 1);
  }
  {
    SingleGroup g;
    absl::Status st = g.AllToAll(at::zeros({6}), at::zeros({5}))->Wait();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(st.message()), HasSubstr("all_to_all"));
  }
  at::Tensor buf = at::zeros({8});
  EXPECT_THAT(std::string(zt::comm::CheckAllToAllArgs(buf, buf, 1, std::nullopt).message()), HasSubstr("overlap"));
  EXPECT_THAT(std::string(zt::comm::CheckAllToAllArgs(at::zeros({7}), at::zeros({7}), 2, std::nullopt).message()),
              HasSubstr("a multiple of the 2 ranks"));
  EXPECT_THAT(
      std::string(zt::comm::CheckAllToAllArgs(at::zeros({8}), at::zeros({8}, at::kByte), 2, std::nullopt).message()),
      HasSubstr("`input` is fp32 but `output` is"));
}

TEST(InitProcessGroup, OneRankIsSingleUnlessGlooIsForced) {
  zt::comm::RankEnv env;  // defaults: rank 0 of 1
  auto g = zt::comm::InitProcessGroup(env, {});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->backend_name(), "single");

  zt::comm::GroupOptions gloo;
  gloo.backend = zt::comm::BackendChoice::kGloo;
  auto g2 = zt::comm::InitProcessGroup(env, gloo);
  ASSERT_TRUE(g2.ok()) << g2.status();
  EXPECT_EQ((*g2)->backend_name(), "gloo");
  at::Tensor t = at::ones({3});
  EXPECT_TRUE((*g2)->AllReduce(t, ReduceOp::kAvg)->Wait().ok());
  EXPECT_TRUE(at::equal(t, at::ones({3})));

  zt::comm::RankEnv two;
  two.world_size = 2;
  zt::comm::GroupOptions single;
  single.backend = zt::comm::BackendChoice::kSingle;
  auto bad = zt::comm::InitProcessGroup(two, single);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("backend 'single' needs a world of one rank, but the world size is 2"));
}

TEST(DefaultThreadsPerRank, SplitsCoresAmongLocalRanks) {
  const int all = zt::comm::DefaultThreadsPerRank(1);
  EXPECT_GE(all, 1);
  EXPECT_EQ(zt::comm::DefaultThreadsPerRank(all * 4), 1);
  EXPECT_EQ(zt::comm::DefaultThreadsPerRank(2), std::max(1, all / 2));
}

}  // namespace
