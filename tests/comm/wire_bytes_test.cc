// The byte counters against the kernel's own count: for a large collective of
// each kind, the TCP bytes this process sent and received (TCP_INFO of all
// its sockets) must match the group's counters within a few percent. The
// slack covers gloo's framing, heartbeats and barriers' headers.
#include <ATen/ATen.h>

#include <cstdio>
#include <cstdlib>
#include <functional>

#include "absl/strings/str_cat.h"
#include "comm/init.h"
#include "comm/socket_counters.h"
#include "gtest/gtest.h"
#include "launch/rank_env.h"
#include "tests/testing/ranks.h"
#include "util/status.h"

namespace {

using zt::comm::CollectiveKind;
using zt::comm::ProcessGroup;
using zt::comm::ReduceOp;

absl::Status Near(const char* what, const char* dir, int64_t wire, int64_t counted) {
  const double slack = 0.02 * static_cast<double>(counted) + 64 * 1024;
  std::printf("%s %s: wire %lld, counters %lld\n", what, dir, static_cast<long long>(wire),
              static_cast<long long>(counted));
  if (std::abs(static_cast<double>(wire - counted)) <= slack) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, " ", dir, ": the sockets moved ", wire, " bytes but the counters say ", counted));
}

// Runs `fn` (one collective) between snapshots of the socket counters and
// compares the deltas with the group's counters for `kind`.
absl::Status Measure(ProcessGroup& g, CollectiveKind kind, const std::function<absl::Status()>& fn) {
  // The snapshot comes before the barrier: a peer that leaves the barrier
  // first starts sending at once, and its bytes must land after `before`.
  // The barrier's own few bytes fall inside the slack. No sleeps: `sent`
  // counts bytes written (acknowledged or still queued), so it does not
  // wait for the peer's acks, and every byte this rank needs has arrived
  // when fn() returns.
  ZT_ASSIGN_OR_RETURN(zt::comm::SocketBytes before, zt::comm::ReadSocketBytes());
  g.ResetStats();
  ZT_RETURN_IF_ERROR(g.Barrier()->Wait());
  ZT_RETURN_IF_ERROR(fn());
  ZT_ASSIGN_OR_RETURN(zt::comm::SocketBytes after, zt::comm::ReadSocketBytes());
  const zt::comm::CollectiveCounters c = g.stats()[kind];
  const char* name = zt::comm::ToString(kind);
  if (c.bytes_sent == 0 && c.bytes_received == 0) {
    return absl::InternalError(absl::StrCat(name, ": counters are zero"));
  }
  ZT_RETURN_IF_ERROR(Near(name, "sent", after.sent - before.sent, c.bytes_sent));
  return Near(name, "received", after.received - before.received, c.bytes_received);
}

}  // namespace

ZT_RANK_WORKER(wire_bytes) {
  ZT_ASSIGN_OR_RETURN(zt::comm::RankEnv env, zt::comm::ReadRankEnv());
  zt::comm::GroupOptions options;
  options.backend = zt::comm::BackendChoice::kGloo;  // the sockets are what is measured
  ZT_ASSIGN_OR_RETURN(auto group, zt::comm::InitProcessGroup(env, options));
  ProcessGroup& g = *group;
  const int n = g.size();
  const int r = g.rank();
  const int64_t numel = (int64_t{4} << 20) + 3;  // 16 MiB of fp32, uneven shards
  at::Tensor flat = at::ones({numel});
  const int64_t b = zt::comm::ShardBegin(numel, n, r);
  at::Tensor shard = flat.narrow(0, b, zt::comm::ShardEnd(numel, n, r) - b);
  at::Tensor out = at::empty({shard.numel()});
  ZT_RETURN_IF_ERROR(Measure(g, CollectiveKind::kAllGather, [&] { return g.AllGather(shard, flat)->Wait(); }));
  ZT_RETURN_IF_ERROR(
      Measure(g, CollectiveKind::kReduceScatter, [&] { return g.ReduceScatter(flat, out, ReduceOp::kSum)->Wait(); }));
  ZT_RETURN_IF_ERROR(Measure(g, CollectiveKind::kAllReduce, [&] { return g.AllReduce(flat, ReduceOp::kSum)->Wait(); }));
  ZT_RETURN_IF_ERROR(Measure(g, CollectiveKind::kBroadcast, [&] { return g.Broadcast(flat, 1)->Wait(); }));
  return g.Barrier()->Wait();
}

TEST(WireBytes, CountersMatchTheSockets) {
  if (!zt::comm::ReadSocketBytes().ok()) GTEST_SKIP() << "kernel does not report TCP byte counts";
  for (int world : {2, 4}) {
    for (const char* algo : {"alltoall", "ring"}) {
      zt::testing::RankRunOptions opts;
      opts.world_size = world;
      opts.extra_env = {{"ZT_REDUCE_SCATTER_ALGO", algo}};
      auto result = zt::testing::RunRanks("wire_bytes", opts);
      EXPECT_TRUE(result.ok()) << algo << "\n" << result.Summary();
      if (std::getenv("ZT_TEST_VERBOSE")) std::printf("%s", result.outputs[0].c_str());
    }
  }
}

int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }
