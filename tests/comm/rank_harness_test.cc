// Tests of the multi-process rank harness (tests/testing/ranks.h): workers that
// succeed, fail, throw, hang (killed at the timeout) and kill themselves
// (may_fail_ranks), each in real processes started through the launcher.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/testing/ranks.h"

namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "<unset>";
}

absl::Status ExpectEnv(const char* name, const std::string& expected) {
  std::string actual = Env(name);
  if (actual == expected) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(name, "=", actual, ", expected ", expected));
}

// Sleeps in small steps until `done` or about `max_seconds`.
template <typename Fn>
bool WaitFor(Fn done, double max_seconds) {
  for (int i = 0; i < static_cast<int>(max_seconds * 100); ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

}  // namespace

// Checks the launcher environment; ctx.arg is the expected OMP_NUM_THREADS.
ZT_RANK_WORKER(check_env) {
  for (absl::Status st :
       {ExpectEnv("RANK", std::to_string(ctx.rank)), ExpectEnv("WORLD_SIZE", std::to_string(ctx.world_size)),
        ExpectEnv("LOCAL_RANK", std::to_string(ctx.rank)),
        ExpectEnv("LOCAL_WORLD_SIZE", std::to_string(ctx.world_size)), ExpectEnv("MASTER_ADDR", "127.0.0.1"),
        ExpectEnv("OMP_NUM_THREADS", ctx.arg)}) {
    if (!st.ok()) return st;
  }
  int port = 0;
  if (!absl::SimpleAtoi(Env("MASTER_PORT"), &port) || port <= 0 || port > 65535) {
    return absl::InternalError(absl::StrCat("MASTER_PORT=", Env("MASTER_PORT"), " is not a port"));
  }
  std::printf("hello from rank %d of %d\n", ctx.rank, ctx.world_size);
  return absl::OkStatus();
}

// Fails on the rank given in ctx.arg.
ZT_RANK_WORKER(fail_on_rank) {
  if (std::to_string(ctx.rank) == ctx.arg) {
    std::printf("rank %d about to fail\n", ctx.rank);
    return absl::FailedPreconditionError(absl::StrCat("planned failure on rank ", ctx.rank));
  }
  return absl::OkStatus();
}

ZT_RANK_WORKER(throws) { throw std::runtime_error(absl::StrCat("thrown on rank ", ctx.rank)); }

// Rank 0 returns at once; the others hang. arg "ignore_term": they also ignore SIGTERM.
ZT_RANK_WORKER(hang) {
  if (ctx.rank == 0) return absl::OkStatus();
  if (ctx.arg == "ignore_term") ::signal(SIGTERM, SIG_IGN);
  std::printf("rank %d hanging\n", ctx.rank);
  std::fflush(stdout);
  while (true) ::pause();
}

// The last rank writes its pid to the file in ctx.arg and kills itself; the
// others wait until it is dead and then a while longer, so a harness that
// wrongly stopped them on its death would be caught.
ZT_RANK_WORKER(last_rank_dies) {
  const std::string pid_file = ctx.arg;
  if (ctx.rank == ctx.world_size - 1) {
    { std::ofstream(pid_file + ".tmp") << ::getpid() << "\n"; }
    std::rename((pid_file + ".tmp").c_str(), pid_file.c_str());
    ::raise(SIGKILL);
  }
  int pid = 0;
  bool dead = WaitFor(
      [&] {
        std::ifstream in(pid_file);
        if (!(in >> pid)) return false;
        std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
        std::string line;
        std::getline(stat, line);
        size_t paren = line.rfind(')');
        return line.empty() || (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z');
      },
      60);
  if (!dead) return absl::DeadlineExceededError("the last rank never died");
  std::this_thread::sleep_for(std::chrono::seconds(1));
  std::printf("rank %d survived\n", ctx.rank);
  return absl::OkStatus();
}

// How this rank was started, checked against ctx.arg: "server <launcher pid>"
// or "exec <launcher pid>". Either way it must be the launcher's child, lead
// its own process group, die with the launcher (PR_SET_PDEATHSIG) and start
// with no signal blocked, as launch/launcher.h promises.
ZT_RANK_WORKER(report_start) {
  std::vector<std::string> want = absl::StrSplit(ctx.arg, ' ');
  if (want.size() != 2) return absl::InvalidArgumentError("arg: server|exec <pid>");
  const bool forked = zt::testing::RankForkedFromServer();
  if (forked != (want[0] == "server")) {
    return absl::InternalError(
        absl::StrCat("rank ", ctx.rank, " was ", forked ? "forked from the server" : "exec'd", ", expected ", want[0]));
  }
  if (std::to_string(::getppid()) != want[1]) {
    return absl::InternalError(absl::StrCat("parent ", ::getppid(), ", expected the launcher ", want[1]));
  }
  if (::getpgrp() != ::getpid()) return absl::InternalError("not the leader of its own process group");
  int death_signal = 0;
  ::prctl(PR_GET_PDEATHSIG, &death_signal);
  if (death_signal != SIGKILL) return absl::InternalError(absl::StrCat("PR_SET_PDEATHSIG is ", death_signal));
  sigset_t mask;
  ::sigprocmask(SIG_SETMASK, nullptr, &mask);
  for (int sig = 1; sig < 32; ++sig) {
    if (sigismember(&mask, sig)) return absl::InternalError(absl::StrCat("signal ", sig, " is blocked"));
  }
  std::printf("rank %d started by %s, stdout captured\n", ctx.rank, forked ? "the server" : "exec");
  std::fprintf(stderr, "rank %d stderr captured\n", ctx.rank);
  return ExpectEnv("ZT_HARNESS_PROBE", Env("ZT_HARNESS_EXPECTED_PROBE"));
}

namespace {

TEST(RankHarness, RanksAreForkedFromTheServerWhereItCanServeThem) {
  const std::string pid = std::to_string(::getpid());
  const bool server =
      std::getenv("ZT_RANK_FORK_SERVER") == nullptr || std::string(std::getenv("ZT_RANK_FORK_SERVER")) != "0";
  // A variable set after the server started reaches the ranks all the same:
  // each rank gets the launcher's environment, not the server's.
  ::setenv("ZT_HARNESS_PROBE", absl::StrCat("late-", pid).c_str(), 1);
  const std::map<std::string, std::string> probe = {{"ZT_HARNESS_EXPECTED_PROBE", absl::StrCat("late-", pid)}};
  struct Case {
    const char* what;
    bool fork_server;
    std::map<std::string, std::string> extra_env;
    bool forked;
  };
  std::map<std::string, std::string> omp3 = probe;
  omp3["OMP_NUM_THREADS"] = "3";  // libgomp reads it while loading: exec'd
  for (const Case& c : {Case{"default", true, probe, server}, Case{"fork_server false", false, probe, false},
                        Case{"another OMP_NUM_THREADS", true, omp3, false}}) {
    SCOPED_TRACE(c.what);
    auto result = zt::testing::RunRanks("report_start", {.world_size = 3,
                                                         .arg = absl::StrCat(c.forked ? "server " : "exec ", pid),
                                                         .extra_env = c.extra_env,
                                                         .fork_server = c.fork_server});
    EXPECT_TRUE(result.ok()) << result.Summary();
    for (size_t r = 0; r < result.outputs.size(); ++r) {
      EXPECT_TRUE(absl::StrContains(result.outputs[r], absl::StrCat("rank ", r, " stderr captured")))
          << result.Summary();
    }
  }
  ::unsetenv("ZT_HARNESS_PROBE");
}

TEST(RankHarness, EveryRankGetsTheLauncherEnvironment) {
  for (int world : {1, 2, 3, 4}) {
    auto result = zt::testing::RunRanks("check_env", {.world_size = world, .arg = "1"});
    ASSERT_TRUE(result.ok()) << result.Summary();
    ASSERT_EQ(result.exit_codes.size(), static_cast<size_t>(world));
    ASSERT_EQ(result.outputs.size(), static_cast<size_t>(world));
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(result.exit_codes[r], 0);
      EXPECT_FALSE(result.timed_out[r]);
      EXPECT_EQ(result.outputs[r], absl::StrCat("hello from rank ", r, " of ", world, "\n"));
    }
    EXPECT_TRUE(result.failure.empty()) << result.failure;
  }
}

TEST(RankHarness, ExtraEnvOverridesDefaults) {
  auto result =
      zt::testing::RunRanks("check_env", {.world_size = 2, .arg = "3", .extra_env = {{"OMP_NUM_THREADS", "3"}}});
  EXPECT_TRUE(result.ok()) << result.Summary();
  // And without the override the default 1 would not match "3".
  auto mismatch = zt::testing::RunRanks("check_env", {.world_size = 2, .arg = "3"});
  EXPECT_FALSE(mismatch.ok());
  // The first rank to notice fails the run (the other may be stopped before it checks).
  ASSERT_EQ(mismatch.outputs.size(), 2u);
  EXPECT_TRUE(absl::StrContains(mismatch.outputs[0] + mismatch.outputs[1], "OMP_NUM_THREADS=1, expected 3"))
      << mismatch.Summary();
}

TEST(RankHarness, WorkerErrorFailsTheRunAndIsInTheSummary) {
  auto result = zt::testing::RunRanks("fail_on_rank", {.world_size = 3, .arg = "1"});
  ASSERT_FALSE(result.ok());
  ASSERT_EQ(result.exit_codes.size(), 3u);
  EXPECT_EQ(result.exit_codes[1], 1);
  EXPECT_TRUE(absl::StrContains(result.outputs[1], "rank 1 about to fail")) << result.outputs[1];
  EXPECT_TRUE(absl::StrContains(result.outputs[1], "planned failure on rank 1")) << result.outputs[1];
  std::string summary = result.Summary();
  EXPECT_TRUE(absl::StrContains(summary, "FAILED")) << summary;
  EXPECT_TRUE(absl::StrContains(summary, "rank 1: exit code 1")) << summary;
  EXPECT_TRUE(absl::StrContains(summary, "planned failure on rank 1")) << summary;
  EXPECT_TRUE(absl::StrContains(result.failure, "rank 1 (pid ")) << result.failure;
  EXPECT_TRUE(absl::StrContains(result.failure, "exited with code 1")) << result.failure;
}

TEST(RankHarness, ExceptionInWorkerIsReported) {
  auto result = zt::testing::RunRanks("throws", {.world_size = 1});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.exit_codes[0], 1);
  EXPECT_TRUE(absl::StrContains(result.outputs[0], "thrown on rank 0")) << result.Summary();
}

TEST(RankHarness, HangingRanksAreKilledAtTheTimeout) {
  for (std::string arg : {"", "ignore_term"}) {
    SCOPED_TRACE(arg);
    auto result = zt::testing::RunRanks("hang", {.world_size = 3, .arg = arg, .timeout = std::chrono::seconds(4)});
    ASSERT_FALSE(result.ok());
    ASSERT_EQ(result.timed_out.size(), 3u);
    EXPECT_FALSE(result.timed_out[0]);
    EXPECT_EQ(result.exit_codes[0], 0);
    for (int r : {1, 2}) {
      EXPECT_TRUE(result.timed_out[r]) << result.Summary();
      EXPECT_EQ(result.exit_codes[r], 128 + (arg.empty() ? SIGTERM : SIGKILL)) << result.Summary();
      EXPECT_TRUE(absl::StrContains(result.outputs[r], absl::StrCat("rank ", r, " hanging"))) << result.Summary();
    }
    std::string summary = result.Summary();
    EXPECT_TRUE(absl::StrContains(summary, "rank 1: timed out")) << summary;
    EXPECT_TRUE(absl::StrContains(result.failure, "timed out after 4 s")) << summary;
  }
}

TEST(RankHarness, MayFailRanksDoNotFailOrStopTheRun) {
  std::string pid_file = absl::StrCat(::testing::TempDir(), "zt_rank_harness_", ::getpid(), ".pid");
  std::remove(pid_file.c_str());
  auto result = zt::testing::RunRanks("last_rank_dies", {.world_size = 3, .arg = pid_file, .may_fail_ranks = {2}});
  std::remove(pid_file.c_str());
  EXPECT_TRUE(result.ok()) << result.Summary();
  ASSERT_EQ(result.exit_codes.size(), 3u);
  EXPECT_EQ(result.exit_codes[2], 128 + SIGKILL);
  for (int r : {0, 1}) {
    EXPECT_EQ(result.exit_codes[r], 0) << result.Summary();
    EXPECT_TRUE(absl::StrContains(result.outputs[r], "survived")) << result.Summary();
  }
  // Without may_fail_ranks the same death fails the run and stops the others.
  std::remove(pid_file.c_str());
  auto strict = zt::testing::RunRanks("last_rank_dies", {.world_size = 3, .arg = pid_file});
  std::remove(pid_file.c_str());
  EXPECT_FALSE(strict.ok());
  EXPECT_TRUE(absl::StrContains(strict.failure, "rank 2 (pid ")) << strict.Summary();
  EXPECT_TRUE(absl::StrContains(strict.failure, "killed by signal 9 (SIGKILL); stopped ranks 0, 1"))
      << strict.Summary();
  EXPECT_EQ(strict.exit_codes[0], 128 + SIGTERM) << strict.Summary();
}

TEST(RankHarness, UnknownWorkerIsAClearError) {
  auto result = zt::testing::RunRanks("no_such_worker", {.world_size = 2});
  EXPECT_FALSE(result.ok());
  EXPECT_TRUE(absl::StrContains(result.Summary(), "no rank worker named 'no_such_worker'")) << result.Summary();
}

}  // namespace

int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }
