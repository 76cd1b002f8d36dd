// Multi-process tests of the collectives (ranks are real processes on
// 127.0.0.1): every collective against a locally computed reference for
// world sizes 1-4, uneven and empty shards, several dtypes, in-place
// all-gather, many async collectives waited in reverse order, both
// reduce-scatter algorithms, and byte counters against analytic volumes.
#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "comm/init.h"
#include "gtest/gtest.h"
#include "launch/rank_env.h"
#include "tests/comm/comm_test_util.h"
#include "tests/testing/ranks.h"
#include "util/status.h"

namespace {

using zt::comm::CollectiveKind;
using zt::comm::ProcessGroup;
using zt::comm::ReduceOp;
using zt::comm::ShardBegin;
using zt::comm::ShardEnd;
using zt::comm::testing::AllInputs;
using zt::comm::testing::Compare;
using zt::comm::testing::ReferenceReduce;

// "slot=256,dir=/tmp/x" style worker arguments.
std::string ArgValue(const std::string& arg, const std::string& key) {
  for (absl::string_view part : absl::StrSplit(arg, ',')) {
    if (absl::ConsumePrefix(&part, key + "=")) return std::string(part);
  }
  return "";
}

struct Setup {
  std::shared_ptr<ProcessGroup> group;
  bool exact_reductions = true;  // the ring forwards rounded partial sums
};

// ctx.arg: comma-separated "algo=ring|alltoall", "backend=gloo|shm",
// "slot=<bytes>" (the shared-memory slot), "dir=<path>".
absl::StatusOr<Setup> MakeGroup(const std::string& arg) {
  ZT_ASSIGN_OR_RETURN(zt::comm::RankEnv env, zt::comm::ReadRankEnv());
  zt::comm::GroupOptions options;
  options.timeout = std::chrono::seconds(60);
  options.segment_bytes = 256;  // several pipeline segments even for small tensors
  Setup setup;
  if (absl::StrContains(arg, "algo=ring")) {
    options.reduce_scatter_algorithm = zt::comm::ReduceScatterAlgorithm::kRing;
    setup.exact_reductions = false;
  }
  if (absl::StrContains(arg, "backend=gloo")) options.backend = zt::comm::BackendChoice::kGloo;
  if (absl::StrContains(arg, "backend=shm")) options.backend = zt::comm::BackendChoice::kShm;
  if (const std::string slot = ArgValue(arg, "slot"); !slot.empty()) {
    ZT_CHECK(absl::SimpleAtoi(slot, &options.shm_slot_bytes));
  }
  ZT_ASSIGN_OR_RETURN(setup.group, zt::comm::InitProcessGroup(env, options));
  // One host: shared memory unless Gloo is asked for or the ring (a Gloo
  // algorithm) is; one rank: the single-rank group unless Gloo is forced.
  const bool gloo = options.backend == zt::comm::BackendChoice::kGloo || !setup.exact_reductions;
  const std::string want_backend = env.world_size == 1
                                       ? (options.backend == zt::comm::BackendChoice::kGloo ? "gloo" : "single")
                                   : gloo ? "gloo"
                                          : "shm";
  if (setup.group->backend_name() != want_backend) {
    return absl::InternalError(absl::StrCat("backend ", setup.group->backend_name(), ", expected ", want_backend));
  }
  return setup;
}

// Tolerance for reductions whose partial sums were rounded on the way.
double Tolerance(at::ScalarType dtype, bool exact, int world) {
  if (exact) return 0.0;
  if (dtype == at::kBFloat16) return 0.02 * world;
  if (dtype == at::kHalf) return 0.004 * world;
  if (dtype == at::kFloat) return 1e-6 * world;
  return 0.0;
}

at::Tensor Slice(const at::Tensor& t, int world, int rank) {
  const int64_t b = ShardBegin(t.numel(), world, rank);
  return t.narrow(0, b, ShardEnd(t.numel(), world, rank) - b);
}

std::string Where(const char* what, at::ScalarType dtype, int64_t numel) {
  return absl::StrCat(what, " ", c10::toString(dtype), " numel=", numel);
}

// One round of every collective on `numel` elements of `dtype`, waited at once.
absl::Status CheckAll(const Setup& s, at::ScalarType dtype, int64_t numel, uint64_t& seed) {
  ProcessGroup& g = *s.group;
  const int n = g.size();
  const int r = g.rank();
  const bool floating = c10::isFloatingType(dtype);
  const double tol = Tolerance(dtype, s.exact_reductions, n);

  // All-gather, out of place and in place.
  {
    auto inputs = AllInputs(n, numel, dtype, ++seed);
    std::vector<at::Tensor> slices;
    for (int j = 0; j < n; ++j) slices.push_back(Slice(inputs[j], n, j));
    at::Tensor want = at::cat(slices);
    at::Tensor flat = at::full({numel}, 7, at::TensorOptions().dtype(dtype));
    ZT_RETURN_IF_ERROR(g.AllGather(Slice(inputs[r], n, r).clone(), flat)->Wait());
    ZT_RETURN_IF_ERROR(Compare(flat, want, Where("all_gather", dtype, numel)));
    at::Tensor flat2 = at::zeros({numel}, at::TensorOptions().dtype(dtype));
    Slice(flat2, n, r).copy_(Slice(inputs[r], n, r));
    ZT_RETURN_IF_ERROR(g.AllGather(Slice(flat2, n, r), flat2)->Wait());
    ZT_RETURN_IF_ERROR(Compare(flat2, want, Where("in-place all_gather", dtype, numel)));
  }
  // Reduce-scatter (sum, avg for floating types).
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    if (op == ReduceOp::kAvg && !floating) continue;
    auto inputs = AllInputs(n, numel, dtype, ++seed);
    at::Tensor flat = inputs[r].clone();
    at::Tensor shard = at::full({Slice(flat, n, r).numel()}, 3, flat.options());
    ZT_RETURN_IF_ERROR(g.ReduceScatter(flat, shard, op)->Wait());
    ZT_RETURN_IF_ERROR(
        Compare(shard, Slice(ReferenceReduce(inputs, op), n, r), Where(zt::comm::ToString(op), dtype, numel), tol));
    ZT_RETURN_IF_ERROR(Compare(flat, inputs[r], Where("reduce_scatter input", dtype, numel)));
  }
  // All-reduce, every op.
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
    if (op == ReduceOp::kAvg && !floating) continue;
    auto inputs = AllInputs(n, numel, dtype, ++seed);
    at::Tensor t = inputs[r].clone();
    ZT_RETURN_IF_ERROR(g.AllReduce(t, op)->Wait());
    const bool exact_op = op == ReduceOp::kMax || op == ReduceOp::kMin;
    ZT_RETURN_IF_ERROR(Compare(t, ReferenceReduce(inputs, op),
                               Where(absl::StrCat("all_reduce ", zt::comm::ToString(op)).c_str(), dtype, numel),
                               exact_op ? 0.0 : tol));
  }
  // Broadcast from a root that moves with the seed.
  {
    auto inputs = AllInputs(n, numel, dtype, ++seed);
    const int root = static_cast<int>(seed % n);
    at::Tensor t = r == root ? inputs[root].clone() : at::zeros({numel}, inputs[0].options());
    ZT_RETURN_IF_ERROR(g.Broadcast(t, root)->Wait());
    ZT_RETURN_IF_ERROR(Compare(t, inputs[root], Where(absl::StrCat("broadcast root ", root).c_str(), dtype, numel)));
  }
  // All-to-all with blocks of `numel` elements: block j of rank i's input
  // lands in block i of rank j's output.
  {
    auto inputs = AllInputs(n, numel * n, dtype, ++seed);
    at::Tensor out = at::full({numel * n}, 7, inputs[0].options());
    ZT_RETURN_IF_ERROR(g.AllToAll(inputs[r], out)->Wait());
    std::vector<at::Tensor> blocks;
    for (int i = 0; i < n; ++i) blocks.push_back(inputs[i].narrow(0, r * numel, numel));
    ZT_RETURN_IF_ERROR(Compare(out, at::cat(blocks), Where("all_to_all", dtype, numel)));
  }
  return absl::OkStatus();
}

// 32 collectives of mixed kinds in flight at once, waited in reverse order.
absl::Status CheckManyInFlight(const Setup& s, uint64_t& seed) {
  ProcessGroup& g = *s.group;
  const int n = g.size();
  const int r = g.rank();
  struct Pending {
    std::unique_ptr<zt::comm::Work> work;
    std::function<absl::Status()> check;
  };
  std::vector<Pending> pending;
  for (int i = 0; i < 32; ++i) {
    const int64_t numel = 5 + 97 * i;  // uneven for every world size > 1
    const at::ScalarType dtype = (i % 3 == 0) ? at::kBFloat16 : at::kFloat;
    const double tol = Tolerance(dtype, s.exact_reductions, n);
    auto inputs = AllInputs(n, numel, dtype, ++seed);
    switch (i % 4) {
      case 0: {
        at::Tensor flat = at::zeros({numel}, inputs[0].options());
        Slice(flat, n, r).copy_(Slice(inputs[r], n, r));
        at::Tensor want = inputs[0].clone();
        for (int j = 0; j < n; ++j) Slice(want, n, j).copy_(Slice(inputs[j], n, j));
        pending.push_back({g.AllGather(Slice(flat, n, r), flat),
                           [=] { return Compare(flat, want, absl::StrCat("async all_gather ", i)); }});
        break;
      }
      case 1: {
        at::Tensor shard = at::empty({Slice(inputs[r], n, r).numel()}, inputs[0].options());
        at::Tensor want = Slice(ReferenceReduce(inputs, ReduceOp::kSum), n, r);
        pending.push_back({g.ReduceScatter(inputs[r], shard, ReduceOp::kSum),
                           [=] { return Compare(shard, want, absl::StrCat("async reduce_scatter ", i), tol); }});
        break;
      }
      case 2: {
        at::Tensor t = inputs[r].clone();
        at::Tensor want = ReferenceReduce(inputs, ReduceOp::kAvg);
        pending.push_back({g.AllReduce(t, ReduceOp::kAvg),
                           [=] { return Compare(t, want, absl::StrCat("async all_reduce ", i), tol); }});
        break;
      }
      case 3: {
        at::Tensor t = inputs[r].clone();
        const int root = i % n;
        at::Tensor want = inputs[root];
        pending.push_back(
            {g.Broadcast(t, root), [=] { return Compare(t, want, absl::StrCat("async broadcast ", i)); }});
        break;
      }
    }
  }
  for (auto it = pending.rbegin(); it != pending.rend(); ++it) {
    ZT_RETURN_IF_ERROR(it->work->Wait());
    ZT_RETURN_IF_ERROR(it->check());
  }
  return g.Barrier()->Wait();
}

absl::Status ExpectCounter(const zt::comm::CommStats& stats, CollectiveKind kind, int64_t calls, int64_t sent,
                           int64_t received, const std::string& what) {
  const auto& c = stats[kind];
  if (c.calls == calls && c.bytes_sent == sent && c.bytes_received == received) {
    return absl::OkStatus();
  }
  return absl::InternalError(absl::StrCat(what, " counters: calls ", c.calls, " sent ", c.bytes_sent, " received ",
                                          c.bytes_received, "; expected calls ", calls, " sent ", sent, " received ",
                                          received));
}

// Sums a per-rank int64 vector over all ranks (with the group itself).
absl::StatusOr<std::vector<int64_t>> SumOverRanks(ProcessGroup& g, std::vector<int64_t> v) {
  at::Tensor t = at::tensor(v, at::TensorOptions().dtype(at::kLong));
  ZT_RETURN_IF_ERROR(g.AllReduce(t, ReduceOp::kSum)->Wait());
  return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
}

// Byte counters against the analytic volumes, written here independently of
// the implementation: for a buffer of S bytes over n ranks, all-gather and
// reduce-scatter move (n-1)/n * S per rank each way, all-reduce twice that;
// broadcast delivers S to each non-root (the root sends ceil(log2 n) * S).
absl::Status CheckCounters(const Setup& s) {
  ProcessGroup& g = *s.group;
  const int n = g.size();
  const int r = g.rank();
  const bool single = g.backend_name() == "single";
  const int64_t es = 4;

  // Even split: per-rank formulas.
  const int64_t numel = 1024 * n;
  const int64_t S = numel * es;
  at::Tensor flat = at::ones({numel});
  at::Tensor shard = at::empty({numel / n});
  g.ResetStats();
  ZT_RETURN_IF_ERROR(g.AllGather(Slice(flat, n, r), flat)->Wait());
  ZT_RETURN_IF_ERROR(g.ReduceScatter(flat, shard, ReduceOp::kSum)->Wait());
  ZT_RETURN_IF_ERROR(g.AllReduce(flat, ReduceOp::kSum)->Wait());
  ZT_RETURN_IF_ERROR(g.Broadcast(flat, 0)->Wait());
  at::Tensor exchanged = at::empty({numel});
  ZT_RETURN_IF_ERROR(g.AllToAll(flat, exchanged)->Wait());
  zt::comm::CommStats st = g.stats();
  const int64_t one_way = single ? 0 : (n - 1) * S / n;
  ZT_RETURN_IF_ERROR(ExpectCounter(st, CollectiveKind::kAllGather, 1, one_way, one_way, "all_gather"));
  ZT_RETURN_IF_ERROR(ExpectCounter(st, CollectiveKind::kReduceScatter, 1, one_way, one_way, "reduce_scatter"));
  ZT_RETURN_IF_ERROR(ExpectCounter(st, CollectiveKind::kAllReduce, 1, 2 * one_way, 2 * one_way, "all_reduce"));
  ZT_RETURN_IF_ERROR(ExpectCounter(st, CollectiveKind::kAllToAll, 1, one_way, one_way, "all_to_all"));
  int log2n = 0;
  while ((1 << log2n) < n) ++log2n;
  if (r == 0) {
    ZT_RETURN_IF_ERROR(ExpectCounter(st, CollectiveKind::kBroadcast, 1, single ? 0 : log2n * S, 0, "broadcast root"));
  } else if (st[CollectiveKind::kBroadcast].bytes_received != S) {
    return absl::InternalError(
        absl::StrCat("broadcast received ", st[CollectiveKind::kBroadcast].bytes_received, ", want ", S));
  }
  if (st.total_bytes_sent() < st[CollectiveKind::kAllGather].bytes_sent) {
    return absl::InternalError("total_bytes_sent() is not the sum of the kinds");
  }

  // Uneven split (and a broadcast): totals over all ranks. Every byte sent is
  // received once; each chunk reaches the n-1 other ranks.
  const int64_t odd = 1000 * n + 1;
  const int64_t S2 = odd * es;
  at::Tensor f2 = at::ones({odd});
  at::Tensor sh2 = at::empty({Slice(f2, n, r).numel()});
  g.ResetStats();
  ZT_RETURN_IF_ERROR(g.AllGather(Slice(f2, n, r), f2)->Wait());
  ZT_RETURN_IF_ERROR(g.ReduceScatter(f2, sh2, ReduceOp::kSum)->Wait());
  ZT_RETURN_IF_ERROR(g.AllReduce(f2, ReduceOp::kSum)->Wait());
  ZT_RETURN_IF_ERROR(g.Broadcast(f2, n - 1)->Wait());
  st = g.stats();
  std::vector<int64_t> mine;
  for (CollectiveKind k : {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter, CollectiveKind::kAllReduce,
                           CollectiveKind::kBroadcast}) {
    mine.push_back(st[k].bytes_sent);
    mine.push_back(st[k].bytes_received);
  }
  ZT_ASSIGN_OR_RETURN(std::vector<int64_t> total, SumOverRanks(g, mine));
  const int64_t all = single ? 0 : (n - 1) * S2;
  const std::vector<int64_t> want = {all, all, all, all, 2 * all, 2 * all, all, all};
  if (total != want) {
    std::string got;
    for (int64_t v : total) absl::StrAppend(&got, v, " ");
    std::string exp;
    for (int64_t v : want) absl::StrAppend(&exp, v, " ");
    return absl::InternalError(absl::StrCat("uneven totals (ag s/r, rs s/r, ar s/r, bc s/r): got ", got, "want ", exp));
  }
  return absl::OkStatus();
}

}  // namespace

ZT_RANK_WORKER(collectives) {
  ZT_ASSIGN_OR_RETURN(Setup setup, MakeGroup(ctx.arg));
  uint64_t seed = 0;
  const std::vector<int64_t> sizes = {0, 1, 3, 5, 17, 1000, 4099};
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    for (int64_t numel : sizes) ZT_RETURN_IF_ERROR(CheckAll(setup, dtype, numel, seed));
  }
  for (at::ScalarType dtype : {at::kDouble, at::kLong, at::kInt}) {
    for (int64_t numel : {int64_t{3}, int64_t{1001}}) {
      ZT_RETURN_IF_ERROR(CheckAll(setup, dtype, numel, seed));
    }
  }
  ZT_RETURN_IF_ERROR(CheckManyInFlight(setup, seed));
  ZT_RETURN_IF_ERROR(CheckCounters(setup));
  std::printf("rank %d: %s ok\n", ctx.rank, setup.group->backend_name().c_str());
  return absl::OkStatus();
}

// Every collective's result bytes, in a fixed order, for the transports to
// be compared bitwise: floating dtypes, sizes from empty to several slots,
// uneven and empty shards, every op, every root.
ZT_RANK_WORKER(record_results) {
  ZT_ASSIGN_OR_RETURN(Setup setup, MakeGroup(ctx.arg));
  ProcessGroup& g = *setup.group;
  const int n = g.size();
  const int r = g.rank();
  std::ofstream out(absl::StrCat(ArgValue(ctx.arg, "dir"), "/", ArgValue(ctx.arg, "name"), ".rank", r),
                    std::ios::binary);
  auto record = [&](const at::Tensor& t) {
    out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.numel() * t.element_size()));
  };
  uint64_t seed = 0;
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf, at::kDouble}) {
    for (int64_t numel :
         {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{17}, int64_t{1000}, int64_t{4099}, int64_t{70001}}) {
      auto inputs = AllInputs(n, numel, dtype, ++seed);
      at::Tensor flat = at::zeros({numel}, inputs[0].options());
      ZT_RETURN_IF_ERROR(g.AllGather(Slice(inputs[r], n, r).clone(), flat)->Wait());
      record(flat);
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
        at::Tensor shard = at::empty({Slice(inputs[r], n, r).numel()}, inputs[0].options());
        ZT_RETURN_IF_ERROR(g.ReduceScatter(inputs[r], shard, op)->Wait());
        record(shard);
      }
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
        at::Tensor t = inputs[r].clone();
        ZT_RETURN_IF_ERROR(g.AllReduce(t, op)->Wait());
        record(t);
      }
      for (int root = 0; root < n; ++root) {
        at::Tensor t = inputs[r].clone();
        ZT_RETURN_IF_ERROR(g.Broadcast(t, root)->Wait());
        record(t);
      }
      // Distinct blocks, so a block sent to the wrong rank shows.
      at::Tensor sent = AllInputs(n, numel * n, dtype, ++seed)[r];
      at::Tensor exchanged = at::empty_like(sent);
      ZT_RETURN_IF_ERROR(g.AllToAll(sent, exchanged)->Wait());
      record(exchanged);
    }
  }
  out.close();
  if (!out) return absl::InternalError("could not write the results file");
  std::printf("rank %d: %s recorded\n", r, g.backend_name().c_str());
  return absl::OkStatus();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Shared memory against Gloo's all-to-all, bitwise, at worlds 2-4, with the
// default slot (small all-reduces in one round) and a 256-byte slot (every
// collective in many rounds, the two parities alternating).
TEST(Collectives, SharedMemoryMatchesGlooBitwise) {
  const std::string dir = ::testing::TempDir() + "/shm_vs_gloo";
  std::filesystem::create_directories(dir);
  for (int world : {2, 3, 4}) {
    const std::vector<std::pair<std::string, std::string>> runs = {
        {"gloo", "backend=gloo"}, {"shm", "backend=shm"}, {"shm256", "backend=shm,slot=256"}};
    for (const auto& [name, arg] : runs) {
      auto result = zt::testing::RunRanks(
          "record_results", {.world_size = world, .arg = absl::StrCat(arg, ",dir=", dir, ",name=", name)});
      ASSERT_TRUE(result.ok()) << result.Summary();
    }
    for (int r = 0; r < world; ++r) {
      const std::string gloo = ReadFile(absl::StrCat(dir, "/gloo.rank", r));
      ASSERT_GT(gloo.size(), 100000u);
      EXPECT_TRUE(gloo == ReadFile(absl::StrCat(dir, "/shm.rank", r))) << "world " << world << " rank " << r;
      EXPECT_TRUE(gloo == ReadFile(absl::StrCat(dir, "/shm256.rank", r))) << "world " << world << " rank " << r;
    }
  }
}

// stats().wait_seconds: the time a caller blocked in Wait. Rank 1 joins an
// all-reduce 300 ms late: rank 0 waits about that long, rank 1 (its peer
// already there) much less; a work waited after it completed adds nothing;
// ResetStats clears it.
ZT_RANK_WORKER(wait_time) {
  ZT_ASSIGN_OR_RETURN(Setup setup, MakeGroup(ctx.arg));
  ProcessGroup& g = *setup.group;
  at::Tensor t = at::ones({1000});
  ZT_RETURN_IF_ERROR(g.Barrier()->Wait());
  g.ResetStats();
  if (g.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ZT_RETURN_IF_ERROR(g.AllReduce(t, ReduceOp::kSum)->Wait());
  const double waited = g.stats().wait_seconds;
  std::printf("rank %d waited %.3f s\n", g.rank(), waited);
  if (g.rank() == 0 && waited < 0.25) return absl::InternalError(absl::StrCat("rank 0 waited only ", waited, " s"));
  if (g.rank() == 1 && waited > 0.2) return absl::InternalError(absl::StrCat("rank 1 waited ", waited, " s"));
  auto work = g.AllReduce(t, ReduceOp::kSum);
  while (!work->IsCompleted()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const double before = g.stats().wait_seconds;
  ZT_RETURN_IF_ERROR(work->Wait());
  if (g.stats().wait_seconds != before) return absl::InternalError("waiting on a completed work counted time");
  g.ResetStats();
  if (g.stats().wait_seconds != 0) return absl::InternalError("ResetStats left wait time");
  return absl::OkStatus();
}

TEST(Collectives, WaitTimeIsTheCallersBlockedTime) {
  for (const char* arg : {"backend=shm", "backend=gloo"}) {
    auto result = zt::testing::RunRanks("wait_time", {.world_size = 2, .arg = arg});
    EXPECT_TRUE(result.ok()) << arg << ": " << result.Summary();
  }
}

TEST(Collectives, GlooAllToAllWorlds2To4) {
  for (int world : {2, 3, 4}) {
    auto result = zt::testing::RunRanks("collectives", {.world_size = world, .arg = "algo=alltoall,backend=gloo"});
    EXPECT_TRUE(result.ok()) << result.Summary();
  }
}

TEST(Collectives, SharedMemoryWithSmallSlots) {
  for (int world : {2, 3}) {
    auto result = zt::testing::RunRanks("collectives", {.world_size = world, .arg = "backend=shm,slot=256"});
    EXPECT_TRUE(result.ok()) << result.Summary();
  }
}

TEST(Collectives, AllToAllReduceScatterWorlds1To4) {
  for (int world : {1, 2, 3, 4}) {
    auto result = zt::testing::RunRanks("collectives", {.world_size = world, .arg = "algo=alltoall"});
    EXPECT_TRUE(result.ok()) << result.Summary();
  }
}

TEST(Collectives, RingReduceScatterWorlds2To4) {
  for (int world : {2, 3, 4}) {
    auto result = zt::testing::RunRanks("collectives", {.world_size = world, .arg = "algo=ring"});
    EXPECT_TRUE(result.ok()) << result.Summary();
  }
}

TEST(Collectives, GlooBackendWithOneRank) {
  auto result = zt::testing::RunRanks("collectives", {.world_size = 1, .arg = "backend=gloo"});
  EXPECT_TRUE(result.ok()) << result.Summary();
}

int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }
