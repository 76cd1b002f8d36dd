// launch/fork_spawner.h: which ranks are forked and which exec'd, and that a
// forked rank starts as an exec'd one would (process group, death signal,
// signals, descriptors, environment, exit code). The same worker runs either
// way: forked, through ForkSpawner's RankMain; exec'd, through this binary's
// own main with kRankFlag.
#include "launch/fork_spawner.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "launch/launcher.h"

namespace zt::comm {
namespace {

constexpr char kRankFlag[] = "--fork-spawner-test-rank";

std::string SelfExe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// Descriptors above 2 that exec would have closed.
int CloseOnExecDescriptorsAbove2() {
  int n = 0;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  const int own = ::dirfd(dir);
  while (struct dirent* e = ::readdir(dir)) {
    int fd = -1;
    if (!absl::SimpleAtoi(e->d_name, &fd) || fd <= 2 || fd == own) continue;
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0 && (flags & FD_CLOEXEC) != 0) ++n;
  }
  ::closedir(dir);
  return n;
}

// The rank: one line of facts about how it started, then exits with the
// code its argv asks for.
int Worker(const std::vector<std::string>& argv) {
  int deathsig = 0;
  ::prctl(PR_GET_PDEATHSIG, &deathsig);
  sigset_t blocked;
  ::sigprocmask(SIG_SETMASK, nullptr, &blocked);
  int blocked_count = 0;
  for (int s = 1; s < NSIG; ++s) blocked_count += sigismember(&blocked, s) == 1 ? 1 : 0;
  struct sigaction term {};
  ::sigaction(SIGTERM, nullptr, &term);
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const char* marker = std::getenv("ZT_TEST_MARKER");
  std::printf(
      "forked=%d parent_is_launcher=%d group_leader=%d deathsig=%d blocked=%d sigterm_default=%d cloexec_fds=%d "
      "omp=%s marker=%s rank=%s\n",
      RankWasForked() ? 1 : 0, std::to_string(::getppid()) == std::getenv("ZT_TEST_LAUNCHER_PID") ? 1 : 0,
      ::getpgrp() == ::getpid() ? 1 : 0, deathsig, blocked_count, term.sa_handler == SIG_DFL ? 1 : 0,
      CloseOnExecDescriptorsAbove2(), omp ? omp : "unset", marker ? marker : "unset", std::getenv("RANK"));
  std::fflush(stdout);
  int code = 0;
  return argv.size() > 2 && absl::SimpleAtoi(argv[2], &code) ? code : 0;
}

LaunchOptions Options(int exit_code = 0) {
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.command = {SelfExe(), kRankFlag, std::to_string(exit_code)};
  o.capture_output = true;
  o.print_notes = false;
  o.timeout = std::chrono::seconds(120);
  o.extra_env["ZT_TEST_LAUNCHER_PID"] = std::to_string(::getpid());
  o.extra_env["OMP_NUM_THREADS"] = std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "1";
  o.spawn = ForkSpawner(Worker);
  return o;
}

std::vector<std::string> Lines(const LaunchResult& r) {
  std::vector<std::string> lines;
  for (const RankResult& rank : r.ranks) lines.push_back(rank.output);
  return lines;
}

// Threads of this process, counted as the spawner counts them (/proc/self/task).
int TaskCount() {
  int n = 0;
  if (DIR* dir = ::opendir("/proc/self/task")) {
    while (const dirent* e = ::readdir(dir)) n += e->d_name[0] != '.';
    ::closedir(dir);
  }
  return n;
}

TEST(ForkSpawner, ForksRanksThatStartAsExecWouldStartThem) {
  // Set after this process started: a forked rank must still see it.
  ::setenv("ZT_TEST_MARKER", "late", 1);
  absl::StatusOr<LaunchResult> r = Launch(Options());
  ::unsetenv("ZT_TEST_MARKER");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->failure;
  for (const RankResult& rank : r->ranks) {
    SCOPED_TRACE(rank.output);
    EXPECT_TRUE(absl::StrContains(rank.output,
                                  "forked=1 parent_is_launcher=1 group_leader=1 deathsig=9 blocked=0 "
                                  "sigterm_default=1 cloexec_fds=0"));
    EXPECT_TRUE(absl::StrContains(rank.output, absl::StrCat("marker=late rank=", rank.rank, "\n")));
  }
}

TEST(ForkSpawner, AnOmpThreadCountIsNoReasonToExec) {
  LaunchOptions o = Options();
  o.extra_env["OMP_NUM_THREADS"] = "7";
  absl::StatusOr<LaunchResult> r = Launch(o);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const std::string& line : Lines(*r)) EXPECT_TRUE(absl::StrContains(line, "forked=1 ")) << line;
  for (const std::string& line : Lines(*r)) EXPECT_TRUE(absl::StrContains(line, "omp=7 ")) << line;
}

TEST(ForkSpawner, ExecsWhatItCannotFork) {
  struct Case {
    std::string what;
    std::function<void(LaunchOptions&)> change;
  };
  std::atomic<bool> stop{false};
  const std::vector<Case> cases = {
      {"another load-time variable", [](LaunchOptions& o) { o.extra_env["OPENBLAS_VERBOSE"] = "0"; }},
      {"OMP_NUM_THREADS as a list", [](LaunchOptions& o) { o.extra_env["OMP_NUM_THREADS"] = "1,1"; }},
      {"ZT_FORK_RANKS=0", [](LaunchOptions&) { ::setenv(kForkRanksEnv, "0", 1); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    LaunchOptions o = Options();
    c.change(o);
    absl::StatusOr<LaunchResult> r = Launch(o);
    ::unsetenv(kForkRanksEnv);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->exit_code, 0) << r->failure;
    for (const std::string& line : Lines(*r)) {
      EXPECT_TRUE(absl::StrContains(line, "forked=0 parent_is_launcher=1 group_leader=1 deathsig=9")) << line;
    }
  }
  // A second thread in the launcher: forking could leave its locks held.
  std::thread busy([&] {
    while (!stop) ::usleep(1000);
  });
  absl::StatusOr<LaunchResult> r = Launch(Options());
  stop = true;
  busy.join();
  ASSERT_TRUE(r.ok()) << r.status();
  for (const std::string& line : Lines(*r)) EXPECT_TRUE(absl::StrContains(line, "forked=0 ")) << line;
}

TEST(ForkSpawner, AFailingForkedRankStopsTheLaunchAsAnExecdOneDoes) {
  // The spawner forks only from a single-threaded launcher. Under
  // ThreadSanitizer, whose runtime starts a thread of its own once the process
  // has made one (the case above did), it rightly execs, and there is no
  // forked rank to test.
  if (const int threads = TaskCount(); threads != 1) {
    GTEST_SKIP() << "this process runs " << threads << " threads, so the spawner execs its ranks";
  }
  absl::StatusOr<LaunchResult> r = Launch(Options(/*exit_code=*/3));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 3) << r->failure;
  EXPECT_TRUE(absl::StrContains(r->failure, "exited with code 3")) << r->failure;
  // The launcher stops the other rank when the first fails, which can be
  // before that one has printed: every rank that printed was forked, and the
  // one that failed printed before it exited.
  int printed = 0;
  for (const std::string& line : Lines(*r)) {
    if (line.empty()) continue;
    ++printed;
    EXPECT_TRUE(absl::StrContains(line, "forked=1 ")) << line;
  }
  EXPECT_GE(printed, 1);
}

}  // namespace
}  // namespace zt::comm

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == zt::comm::kRankFlag) {
    return zt::comm::Worker(std::vector<std::string>(argv, argv + argc));
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
