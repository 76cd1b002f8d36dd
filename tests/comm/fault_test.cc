// Fault tests of the process group with real processes: a rank killed or
// stopped while its peers are inside a collective, a rank that never joins,
// an unreachable store, a Wait deadline and a bad argument on one rank. Each
// must become a clear error on the other ranks (naming the collective and,
// where knowable, the rank) well within the harness timeout, never a hang.
// Transfer timeouts are set far above the harness timeout where the test
// expects detection by other means (closed connections, heartbeats).
#include <ATen/ATen.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "comm/collective_label.h"
#include "comm/init.h"
#include "gtest/gtest.h"
#include "launch/rank_env.h"
#include "tests/testing/ranks.h"
#include "util/status.h"

namespace {

using zt::comm::ProcessGroup;
using zt::comm::ReduceOp;

// Parses "victim=2,dir=/tmp/x" style worker arguments.
std::string ArgValue(const std::string& arg, const std::string& key) {
  for (absl::string_view part : absl::StrSplit(arg, ',')) {
    if (absl::ConsumePrefix(&part, key + "=")) return std::string(part);
  }
  return "";
}

int Victim(const std::string& arg) {
  int v = -1;
  ZT_CHECK(absl::SimpleAtoi(ArgValue(arg, "victim"), &v));
  return v;
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> Init() {
  ZT_ASSIGN_OR_RETURN(zt::comm::RankEnv env, zt::comm::ReadRankEnv());
  return zt::comm::InitProcessGroup(env, zt::comm::GroupOptions{});
}

absl::Status Expect(bool cond, const absl::Status& got, const std::string& what) {
  if (cond) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("expected ", what, "; got: ", got.ToString()));
}

// Checks the error of the failed collective and of the next call.
absl::Status ExpectGroupFailure(ProcessGroup& g, const absl::Status& st, const std::string& kind,
                                const std::string& must_mention) {
  std::printf("rank %d got: %s\n", g.rank(), st.ToString().c_str());
  std::fflush(stdout);
  ZT_RETURN_IF_ERROR(Expect(!st.ok(), st, "an error"));
  ZT_RETURN_IF_ERROR(
      Expect(st.code() == absl::StatusCode::kUnavailable || st.code() == absl::StatusCode::kDeadlineExceeded, st,
             "Unavailable or DeadlineExceeded"));
  ZT_RETURN_IF_ERROR(
      Expect(absl::StrContains(st.message(), kind + " #"), st, absl::StrCat("the collective named ('", kind, " #')")));
  ZT_RETURN_IF_ERROR(
      Expect(absl::StrContains(st.message(), must_mention), st, absl::StrCat("a mention of '", must_mention, "'")));
  absl::Status later = g.Barrier()->Wait();
  ZT_RETURN_IF_ERROR(Expect(
      later.code() == absl::StatusCode::kFailedPrecondition && absl::StrContains(later.message(), "failed earlier"),
      later, "FailedPrecondition 'failed earlier' on the next call"));
  return absl::OkStatus();
}

void WritePid(const std::string& dir, int rank) {
  std::ofstream(absl::StrCat(dir, "/rank", rank, ".pid")) << getpid() << "\n";
}

void KillRank(const std::string& dir, int rank) {
  std::ifstream in(absl::StrCat(dir, "/rank", rank, ".pid"));
  int pid = 0;
  if (in >> pid && pid > 0) ::kill(pid, SIGKILL);
}

// All ranks run a few all-reduces; then the survivors start an all-gather
// (which needs the victim) and the victim kills (SIGKILL) or stops (SIGSTOP)
// itself while they are inside it.
absl::Status RunVictimScenario(const zt::testing::RankContext& ctx, int signal_number) {
  const int victim = Victim(ctx.arg);
  const std::string dir = ArgValue(ctx.arg, "dir");
  ZT_ASSIGN_OR_RETURN(auto group, Init());
  ProcessGroup& g = *group;
  at::Tensor t = at::ones({1000});
  for (int i = 0; i < 3; ++i) ZT_RETURN_IF_ERROR(g.AllReduce(t, ReduceOp::kSum)->Wait());
  const int64_t numel = 1 << 20;
  at::Tensor flat = at::zeros({numel});
  const int n = g.size();
  const int64_t b = zt::comm::ShardBegin(numel, n, g.rank());
  at::Tensor shard = flat.narrow(0, b, zt::comm::ShardEnd(numel, n, g.rank()) - b);
  if (g.rank() == victim) {
    if (!dir.empty()) WritePid(dir, g.rank());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // peers are waiting for us
    ::raise(signal_number);
    std::this_thread::sleep_for(std::chrono::seconds(60));  // SIGSTOP: until killed
    return absl::InternalError("the victim survived its signal");
  }
  absl::Status st = g.AllGather(shard, flat)->Wait();
  const std::string expect = signal_number == SIGSTOP && victim != 0
                                 ? absl::StrCat("peer rank ", victim, " stopped responding")
                                 : absl::StrCat("rank ", victim);
  absl::Status result = ExpectGroupFailure(g, st, "all_gather", expect);
  if (signal_number == SIGSTOP && !dir.empty() && g.rank() == (victim == 0 ? 1 : 0)) {
    KillRank(dir, victim);  // end the stopped process instead of waiting for the harness
  }
  return result;
}

// A rank, the store's host (rank 0) included, stops while its peers are in
// a collective. The survivors must get the error and then destroy their
// group within a bound far below the store's own timeout (20 s here): the
// group's shutdown may not wait on a store whose host is frozen. The victim
// stays stopped until every survivor is done, so nothing but the fix can
// end their wait early; the last survivor then kills it.
ZT_RANK_WORKER(stopped_rank_shutdown) {
  const int victim = Victim(ctx.arg);
  const std::string dir = ArgValue(ctx.arg, "dir");
  ZT_ASSIGN_OR_RETURN(auto group, Init());
  at::Tensor t = at::ones({1000});
  for (int i = 0; i < 3; ++i) ZT_RETURN_IF_ERROR(group->AllReduce(t, ReduceOp::kSum)->Wait());
  const int n = group->size();
  if (group->rank() == victim) {
    WritePid(dir, victim);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::raise(SIGSTOP);
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return absl::InternalError("the victim survived its signal");
  }
  at::Tensor flat = at::zeros({1 << 16});
  const int64_t b = zt::comm::ShardBegin(flat.numel(), n, group->rank());
  at::Tensor shard = flat.narrow(0, b, zt::comm::ShardEnd(flat.numel(), n, group->rank()) - b);
  const auto start = std::chrono::steady_clock::now();
  absl::Status st = group->AllGather(shard, flat)->Wait();
  const auto failed = std::chrono::steady_clock::now();
  group.reset();  // the group's shutdown: heartbeat, "left" mark, rank 0's wait for peers
  const auto done = std::chrono::steady_clock::now();
  auto seconds = [](auto d) { return std::chrono::duration<double>(d).count(); };
  std::printf("rank %d: error after %.2f s, group shut down in %.2f s: %s\n", ctx.rank, seconds(failed - start),
              seconds(done - failed), st.ToString().c_str());
  std::fflush(stdout);
  std::ofstream(absl::StrCat(dir, "/done", ctx.rank)) << "1\n";
  bool all_done = true;
  for (int r = 0; r < n; ++r) {
    if (r != victim && access(absl::StrCat(dir, "/done", r).c_str(), F_OK) != 0) all_done = false;
  }
  if (all_done) KillRank(dir, victim);
  ZT_RETURN_IF_ERROR(Expect(!st.ok(), st, "an error"));
  if (seconds(failed - start) > 10.0 || seconds(done - failed) > 6.0) {
    return absl::InternalError(
        absl::StrFormat("rank %d: error after %.2f s and shutdown in %.2f s; expected "
                        "within the 3 s comm timeout plus the diagnosis (10 s) and 6 s",
                        ctx.rank, seconds(failed - start), seconds(done - failed)));
  }
  return absl::OkStatus();
}

// Ranks that issue different collectives at the same point (rank 0
// evaluates alone, the DDP habit; or ranks ran different step counts): every
// rank gets an error naming each rank's collective within seconds, far below
// the 600 s transfer timeout, and no gloo exception ends the process.
ZT_RANK_WORKER(disagreeing_collectives) {
  ZT_ASSIGN_OR_RETURN(auto group, Init());
  at::Tensor t = at::ones({1000});
  for (int i = 0; i < 3; ++i) ZT_RETURN_IF_ERROR(group->AllReduce(t, ReduceOp::kSum)->Wait());
  const auto start = std::chrono::steady_clock::now();
  absl::Status st;
  if (group->rank() == 0) {
    zt::comm::CollectiveLabel label("the evaluation loss");
    at::Tensor small = at::ones({16});
    st = group->AllReduce(small, ReduceOp::kSum)->Wait();
  } else {
    zt::comm::CollectiveLabel label("parameters of unit 'h.3'");
    const int n = group->size();
    at::Tensor flat = at::zeros({1 << 16});
    const int64_t b = zt::comm::ShardBegin(flat.numel(), n, group->rank());
    at::Tensor shard = flat.narrow(0, b, zt::comm::ShardEnd(flat.numel(), n, group->rank()) - b);
    st = group->AllGather(shard, flat)->Wait();  // the next training step's gather
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("rank %d after %.2f s: %s\n", group->rank(), seconds, st.ToString().c_str());
  ZT_RETURN_IF_ERROR(Expect(st.code() == absl::StatusCode::kFailedPrecondition, st, "FailedPrecondition"));
  ZT_RETURN_IF_ERROR(Expect(absl::StrContains(st.message(), "ranks disagree on collective #"), st,
                            "'ranks disagree on collective #'"));
  ZT_RETURN_IF_ERROR(Expect(absl::StrContains(st.message(), "all_reduce #") &&
                                absl::StrContains(st.message(), "(64 B fp32)") &&
                                absl::StrContains(st.message(), "(256 KiB fp32)"),
                            st, "both ranks' collectives named"));
  ZT_RETURN_IF_ERROR(Expect(absl::StrContains(st.message(), "(64 B fp32) for the evaluation loss") &&
                                absl::StrContains(st.message(), "(256 KiB fp32) for parameters of unit 'h.3'"),
                            st, "what each rank's collective was for"));
  ZT_RETURN_IF_ERROR(Expect(seconds < 10.0, st, "the error within 10 s"));
  return absl::OkStatus();
}

// Same kind, size and type but different labels (two units of one size):
// still a disagreement, named with both labels, before any data moves.
ZT_RANK_WORKER(disagreeing_labels) {
  ZT_ASSIGN_OR_RETURN(auto group, Init());
  at::Tensor t = at::ones({1000});
  zt::comm::CollectiveLabel label(group->rank() == 0 ? "parameters of unit 'h.0'" : "parameters of unit 'h.5'");
  absl::Status st = group->AllReduce(t, ReduceOp::kSum)->Wait();
  std::printf("rank %d: %s\n", group->rank(), st.ToString().c_str());
  ZT_RETURN_IF_ERROR(Expect(st.code() == absl::StatusCode::kFailedPrecondition &&
                                absl::StrContains(st.message(), "for parameters of unit 'h.0'") &&
                                absl::StrContains(st.message(), "for parameters of unit 'h.5'"),
                            st, "FailedPrecondition naming both labels"));
  if (t[0].item<float>() != 1.0f) return absl::InternalError("data moved despite the disagreement");
  return absl::OkStatus();
}

std::string TempDir() {
  char tmpl[] = "/tmp/zt_fault_XXXXXX";
  const char* dir = mkdtemp(tmpl);
  return dir ? dir : "/tmp";
}

// ZT_TEST_VERBOSE=1 prints every rank's output (the error messages users see).
void MaybePrint(const zt::testing::RankRunResult& result) {
  if (std::getenv("ZT_TEST_VERBOSE") == nullptr) return;
  for (size_t r = 0; r < result.outputs.size(); ++r) {
    std::printf("--- rank %zu (exit %d)\n%s", r, result.exit_codes[r], result.outputs[r].c_str());
  }
}

zt::testing::RankRunOptions FaultOptions(int world, std::string arg, const char* comm_timeout_s) {
  zt::testing::RankRunOptions opts;
  opts.world_size = world;
  opts.arg = std::move(arg);
  opts.timeout = std::chrono::seconds(40);
  opts.extra_env = {
      {"ZT_COMM_TIMEOUT_S", comm_timeout_s}, {"ZT_COMM_HEARTBEAT_S", "0.25"}, {"ZT_RENDEZVOUS_TIMEOUT_S", "20"}};
  return opts;
}

}  // namespace

// The store's host (rank 0) freezes while the others are still joining the
// rendezvous: they connect (the kernel accepts into the listen backlog) but
// nothing answers. Each must fail within the rendezvous timeout (3 s here)
// plus one more store deadline for the diagnosis, naming the store and rank
// 0, instead of waiting on a socket without a deadline.
ZT_RANK_WORKER(store_host_stops_in_rendezvous) {
  const std::string dir = ArgValue(ctx.arg, "dir");
  if (ctx.rank == 0) {
    WritePid(dir, 0);
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the store is up by now
      ::raise(SIGSTOP);
    }).detach();
    absl::Status st = Init().status();
    return absl::InternalError(absl::StrCat("the stopped store host went on: ", st.ToString()));
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));  // join after rank 0 froze
  const auto start = std::chrono::steady_clock::now();
  absl::Status st = Init().status();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("rank %d after %.2f s: %s\n", ctx.rank, seconds, st.ToString().c_str());
  std::fflush(stdout);
  std::ofstream(absl::StrCat(dir, "/done", ctx.rank)) << "1\n";
  bool all_done = true;
  for (int r = 1; r < ctx.world_size; ++r) {
    if (access(absl::StrCat(dir, "/done", r).c_str(), F_OK) != 0) all_done = false;
  }
  if (all_done) KillRank(dir, 0);
  ZT_RETURN_IF_ERROR(Expect(!st.ok(), st, "an error"));
  ZT_RETURN_IF_ERROR(
      Expect(absl::StrContains(st.message(), "rendezvous store") && absl::StrContains(st.message(), "rank 0"), st,
             "the rendezvous store of rank 0 named"));
  return Expect(seconds < 8.0, st, "the error within 8 s (the 3 s rendezvous timeout twice, plus slack)");
}

ZT_RANK_WORKER(killed_mid_collective) { return RunVictimScenario(ctx, SIGKILL); }
ZT_RANK_WORKER(stopped_mid_collective) { return RunVictimScenario(ctx, SIGSTOP); }

// The victim never starts its group; the others must name it.
ZT_RANK_WORKER(never_joins) {
  if (ctx.rank == Victim(ctx.arg)) return absl::OkStatus();
  absl::Status st = Init().status();
  std::printf("rank %d got: %s\n", ctx.rank, st.ToString().c_str());
  ZT_RETURN_IF_ERROR(Expect(st.code() == absl::StatusCode::kDeadlineExceeded, st, "DeadlineExceeded"));
  const std::string want =
      absl::StrCat("rank ", Victim(ctx.arg), " of ", ctx.world_size, " did not join the rendezvous at 127.0.0.1:");
  return Expect(absl::StrContains(st.message(), want) && absl::StrContains(st.message(), "within 2 s"), st,
                absl::StrCat("'", want, "... within 2 s'"));
}

// Rank 0 (the store host) never starts; rank 1 must say it cannot reach it.
ZT_RANK_WORKER(no_store) {
  if (ctx.rank == 0) return absl::OkStatus();
  absl::Status st = Init().status();
  std::printf("rank %d got: %s\n", ctx.rank, st.ToString().c_str());
  const char* port = std::getenv("MASTER_PORT");
  const std::string want = absl::StrCat(
      "could not reach the rendezvous store of rank 0 at 127.0.0.1:", port ? port : "?", " (MASTER_ADDR:MASTER_PORT)");
  return Expect(st.code() == absl::StatusCode::kUnavailable && absl::StrContains(st.message(), want), st,
                absl::StrCat("Unavailable '", want, "'"));
}

// Rank 1 is late; rank 0's Wait(1 s) times out and aborts the group; rank 1's
// collective then fails and reports rank 0's reason.
ZT_RANK_WORKER(wait_timeout) {
  ZT_ASSIGN_OR_RETURN(auto group, Init());
  ProcessGroup& g = *group;
  at::Tensor t = at::ones({4096});
  if (g.rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(3));
  auto work = g.AllReduce(t, ReduceOp::kSum);
  absl::Status st = g.rank() == 0 ? work->Wait(std::chrono::seconds(1)) : work->Wait();
  if (g.rank() == 0) {
    std::printf("rank %d got: %s\n", g.rank(), st.ToString().c_str());
    ZT_RETURN_IF_ERROR(Expect(st.code() == absl::StatusCode::kDeadlineExceeded, st, "DeadlineExceeded"));
    ZT_RETURN_IF_ERROR(Expect(absl::StrContains(st.message(),
                                                "all_reduce #1 (16 KiB fp32) did not "
                                                "complete within 1 s on rank 0"),
                              st, "the collective, its size and the wait"));
    absl::Status again = work->Wait();
    return Expect(again == st, again, "the same status from a second Wait");
  }
  return ExpectGroupFailure(g, st, "all_reduce", "did not complete within 1 s on rank 0");
}

// Rank 1 passes a shard of the wrong size: it gets InvalidArgument, and rank
// 0 (inside the collective) learns why instead of waiting for a timeout.
ZT_RANK_WORKER(bad_argument) {
  ZT_ASSIGN_OR_RETURN(auto group, Init());
  ProcessGroup& g = *group;
  at::Tensor flat = at::zeros({10});
  at::Tensor shard = at::ones({g.rank() == 1 ? 4 : 5});
  absl::Status st = g.AllGather(shard, flat)->Wait();
  if (g.rank() == 1) {
    std::printf("rank %d got: %s\n", g.rank(), st.ToString().c_str());
    return Expect(st.code() == absl::StatusCode::kInvalidArgument &&
                      absl::StrContains(st.message(), "`shard` has 4 elements but rank 1's shard"),
                  st, "InvalidArgument naming the shard size");
  }
  return ExpectGroupFailure(g, st, "all_gather", "rank 1");
}

TEST(Faults, KilledRankIsNamedBySurvivors) {
  for (int victim : {2, 0}) {
    auto result = zt::testing::RunRanks("killed_mid_collective", [&] {
      auto o = FaultOptions(3, absl::StrCat("victim=", victim), "600");
      o.may_fail_ranks = {victim};
      return o;
    }());
    MaybePrint(result);
    EXPECT_TRUE(result.ok()) << result.Summary();
    EXPECT_EQ(result.exit_codes[victim], 128 + SIGKILL) << result.Summary();
  }
}

TEST(Faults, KilledRankInWorldOfFour) {
  auto opts = FaultOptions(4, "victim=1", "600");
  opts.may_fail_ranks = {1};
  auto result = zt::testing::RunRanks("killed_mid_collective", opts);
  MaybePrint(result);
  EXPECT_TRUE(result.ok()) << result.Summary();
}

TEST(Faults, StoppedRankBecomesDeadlineExceeded) {
  for (int victim : {2, 0}) {
    auto opts = FaultOptions(3, absl::StrCat("victim=", victim, ",dir=", TempDir()), "3");
    opts.may_fail_ranks = {victim};
    auto result = zt::testing::RunRanks("stopped_mid_collective", opts);
    MaybePrint(result);
    EXPECT_TRUE(result.ok()) << result.Summary();
    for (int r = 0; r < 3; ++r) EXPECT_FALSE(result.timed_out[r]) << result.Summary();
  }
}

class StoppedRankShutdown : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(StoppedRankShutdown, SurvivorsExitWithinTheTimeout) {
  const auto [world, victim] = GetParam();
  auto opts = FaultOptions(world, absl::StrCat("victim=", victim, ",dir=", TempDir()), "3");
  opts.may_fail_ranks = {victim};
  auto result = zt::testing::RunRanks("stopped_rank_shutdown", opts);
  MaybePrint(result);
  EXPECT_TRUE(result.ok()) << result.Summary();
  for (int r = 0; r < world; ++r) EXPECT_FALSE(result.timed_out[r]) << result.Summary();
}

// The store's host (rank 0) and the last rank, at worlds 2 and 3.
INSTANTIATE_TEST_SUITE_P(WorldsAndVictims, StoppedRankShutdown,
                         ::testing::Values(std::make_tuple(2, 0), std::make_tuple(2, 1), std::make_tuple(3, 0),
                                           std::make_tuple(3, 2)),
                         [](const auto& info) {
                           return absl::StrCat("world", std::get<0>(info.param), "_stop_rank", std::get<1>(info.param));
                         });

class StoreHostStopsInRendezvous : public ::testing::TestWithParam<int> {};

TEST_P(StoreHostStopsInRendezvous, OthersFailWithinTheTimeout) {
  const int world = GetParam();
  auto opts = FaultOptions(world, absl::StrCat("dir=", TempDir()), "3");
  opts.extra_env["ZT_RENDEZVOUS_TIMEOUT_S"] = "3";
  opts.may_fail_ranks = {0};
  auto result = zt::testing::RunRanks("store_host_stops_in_rendezvous", opts);
  MaybePrint(result);
  EXPECT_TRUE(result.ok()) << result.Summary();
  for (int r = 1; r < world; ++r) EXPECT_FALSE(result.timed_out[r]) << result.Summary();
}

INSTANTIATE_TEST_SUITE_P(Worlds, StoreHostStopsInRendezvous, ::testing::Values(2, 3),
                         [](const auto& info) { return absl::StrCat("world", info.param); });

TEST(Faults, DisagreeingCollectivesAreNamedOnEveryRank) {
  for (int world : {2, 3}) {
    auto result = zt::testing::RunRanks("disagreeing_collectives", FaultOptions(world, "", "600"));
    MaybePrint(result);
    EXPECT_TRUE(result.ok()) << result.Summary();
  }
}

TEST(Faults, DisagreeingLabelsAreNamedBeforeDataMoves) {
  auto result = zt::testing::RunRanks("disagreeing_labels", FaultOptions(2, "", "600"));
  MaybePrint(result);
  EXPECT_TRUE(result.ok()) << result.Summary();
}

TEST(Faults, RankThatNeverJoinsIsNamed) {
  auto opts = FaultOptions(3, "victim=2", "600");
  opts.extra_env["ZT_RENDEZVOUS_TIMEOUT_S"] = "2";
  auto result = zt::testing::RunRanks("never_joins", opts);
  MaybePrint(result);
  EXPECT_TRUE(result.ok()) << result.Summary();
}

TEST(Faults, UnreachableStoreNamesTheAddress) {
  auto opts = FaultOptions(2, "", "600");
  opts.extra_env["ZT_RENDEZVOUS_TIMEOUT_S"] = "2";
  auto result = zt::testing::RunRanks("no_store", opts);
  MaybePrint(result);
  EXPECT_TRUE(result.ok()) << result.Summary();
}

TEST(Faults, WaitDeadlineAbortsTheGroupOnEveryRank) {
  auto result = zt::testing::RunRanks("wait_timeout", FaultOptions(2, "", "600"));
  MaybePrint(result);
  EXPECT_TRUE(result.ok()) << result.Summary();
}

TEST(Faults, BadArgumentOnOneRankFailsThePeersFast) {
  auto result = zt::testing::RunRanks("bad_argument", FaultOptions(2, "", "600"));
  MaybePrint(result);
  EXPECT_TRUE(result.ok()) << result.Summary();
}

int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }
