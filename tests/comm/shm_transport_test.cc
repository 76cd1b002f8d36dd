// The shared-memory transport's own guarantees, beyond the collectives
// (collectives_test.cc compares its results with Gloo's bitwise):
//  * the segment: a wrong token is refused, the name is gone from /dev/shm
//    once the ranks are connected, a full /dev/shm is an error naming the
//    size and what to change (never a SIGBUS later);
//  * the barrier: a missing rank becomes DeadlineExceeded naming it, an
//    aborting rank's reason reaches the others at once, a dead peer's pid is
//    noticed and named;
//  * the choice: when one rank cannot see the others' /dev/shm (a private
//    mount, as in a container of its own), auto falls back to Gloo on every
//    rank and ZT_COMM_BACKEND=shm fails on every rank naming that rank.
#include <ATen/ATen.h>
#include <dirent.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "comm/init.h"
#include "comm/shm_segment.h"
#include "comm/transport.h"
#include "gtest/gtest.h"
#include "launch/rank_env.h"
#include "tests/testing/ranks.h"
#include "util/status.h"

namespace {

using zt::comm::ShmSegment;
using Clock = std::chrono::steady_clock;

std::vector<std::string> ZtSegments() {
  std::vector<std::string> names;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      if (absl::StartsWith(e->d_name, "zt-")) names.push_back(e->d_name);
    }
    closedir(d);
  }
  return names;
}

// A private mount namespace with its own, empty /dev/shm of `size`: what a
// rank in a container of its own sees. False (with why) where this process
// may not make one (not root, or threads already running).
bool PrivateDevShm(const char* size, std::string* why) {
  if (unshare(CLONE_NEWNS) != 0) {
    *why = absl::StrCat("unshare(CLONE_NEWNS): ", std::strerror(errno));
    return false;
  }
  if (mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      mount("tmpfs", "/dev/shm", "tmpfs", 0, absl::StrCat("size=", size).c_str()) != 0) {
    *why = absl::StrCat("mount tmpfs on /dev/shm: ", std::strerror(errno));
    return false;
  }
  return true;
}

// Runs `body` in a child process (one thread, so it may enter a mount
// namespace of its own) with a private /dev/shm of `size`. The child's
// verdict: exit 0 passed, 1 failed, 2 no namespace (skip); `msg` its words.
struct ChildResult {
  int code = -1;
  std::string msg;
};
ChildResult InPrivateDevShm(const char* size, const std::function<bool(std::string*)>& body) {
  int pipefd[2];
  if (pipe(pipefd) != 0) return {};
  const pid_t child = fork();
  if (child == 0) {
    close(pipefd[0]);
    std::string msg;
    const int code = PrivateDevShm(size, &msg) ? (body(&msg) ? 0 : 1) : 2;
    (void)!write(pipefd[1], msg.data(), msg.size());
    _exit(code);
  }
  close(pipefd[1]);
  ChildResult r;
  char buf[512];
  for (ssize_t n; (n = read(pipefd[0], buf, sizeof buf)) > 0;) r.msg.append(buf, static_cast<size_t>(n));
  close(pipefd[0]);
  int status = 0;
  waitpid(child, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(ShmSegment, WrongTokenIsRefused) {
  auto seg = ShmSegment::Create(2, 4096);
  ASSERT_TRUE(seg.ok()) << seg.status();
  auto other = ShmSegment::Open((*seg)->name(), (*seg)->token() ^ 1, 2, 4096);
  ASSERT_FALSE(other.ok());
  EXPECT_TRUE(absl::StrContains(other.status().message(), "not the one rank 0 announced")) << other.status();
  auto wrong_size = ShmSegment::Open((*seg)->name(), (*seg)->token(), 3, 4096);
  EXPECT_FALSE(wrong_size.ok());
  auto same = ShmSegment::Open((*seg)->name(), (*seg)->token(), 2, 4096);
  EXPECT_TRUE(same.ok()) << same.status();
  const std::string name = (*seg)->name().substr(1);
  (*seg)->Unlink();
  for (const std::string& n : ZtSegments()) EXPECT_NE(n, name);
}

TEST(ShmSegment, MissingRankBecomesANamedDeadline) {
  auto seg = ShmSegment::Create(3, 4096);
  ASSERT_TRUE(seg.ok()) << seg.status();
  (*seg)->SetPid(0, getpid());
  const auto start = Clock::now();
  try {
    (*seg)->Barrier(0, 0, 1, start + std::chrono::milliseconds(200), {10, 11, 12}, std::chrono::milliseconds(200));
    FAIL() << "the barrier passed with two ranks missing";
  } catch (const zt::comm::TransportError& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_TRUE(absl::StrContains(e.what(), "waiting for ranks [11, 12]")) << e.what();
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
}

TEST(ShmSegment, AbortReachesAWaitingPeerAtOnce) {
  auto seg = ShmSegment::Create(2, 4096);
  ASSERT_TRUE(seg.ok()) << seg.status();
  ShmSegment& s = **seg;
  s.SetPid(0, getpid());
  s.SetPid(1, getpid());
  std::string what;
  Clock::duration waited{};
  std::thread waiter([&] {
    const auto start = Clock::now();
    try {
      s.Barrier(1, 0, 1, start + std::chrono::seconds(30), {0, 1}, std::chrono::seconds(30));
    } catch (const zt::comm::TransportError& e) {
      what = e.what();
    }
    waited = Clock::now() - start;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  s.Abort(0, "all_gather #3 failed on rank 0: out of memory");
  waiter.join();
  EXPECT_TRUE(absl::StrContains(what, "rank 0 aborted the group: all_gather #3 failed on rank 0")) << what;
  EXPECT_LT(waited, std::chrono::seconds(2));
  // The barrier itself still works between ranks that both arrive: two
  // threads, one per rank, several rounds.
}

TEST(ShmSegment, BarrierPassesManyRounds) {
  auto seg = ShmSegment::Create(2, 4096);
  ASSERT_TRUE(seg.ok()) << seg.status();
  ShmSegment& s = **seg;
  s.SetPid(0, getpid());
  s.SetPid(1, getpid());
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  // Each round a rank writes its round number into its slot of the round's
  // parity and, after the barrier, reads its peer's: it must be this round's.
  auto body = [&](int rank, int* errors) {
    for (int round = 0; round < 2000; ++round) {
      const int p = round & 1;
      *reinterpret_cast<int*>(s.slot(p, rank)) = round;
      s.Barrier(rank, p, round, deadline, {0, 1}, std::chrono::seconds(30));
      if (*reinterpret_cast<int*>(s.slot(p, 1 - rank)) != round) ++*errors;
      if (rank == 0 && round % 97 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  };
  int e0 = 0, e1 = 0;
  std::thread t1(body, 1, &e1);
  body(0, &e0);
  t1.join();
  EXPECT_EQ(e0 + e1, 0);
}

// Ranks in different collectives (a different signature) fail at their
// first round on both sides instead of reading each other's slots.
TEST(ShmSegment, DifferentCollectivesFailLoudly) {
  auto seg = ShmSegment::Create(2, 4096);
  ASSERT_TRUE(seg.ok()) << seg.status();
  ShmSegment& s = **seg;
  s.SetPid(0, getpid());
  s.SetPid(1, getpid());
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  std::string what[2];
  auto body = [&](int rank) {
    try {
      s.Barrier(rank, 0, (uint64_t{7 + static_cast<uint64_t>(rank)} << 32) | 64, deadline, {0, 1},
                std::chrono::seconds(30));
    } catch (const zt::comm::TransportError& e) {
      if (e.code() == absl::StatusCode::kFailedPrecondition) what[rank] = e.what();
    }
  };
  std::thread t1(body, 1);
  body(0);
  t1.join();
  EXPECT_TRUE(absl::StrContains(what[0], "rank 1 is in collective #8 while rank 0 is in #7")) << what[0];
  EXPECT_TRUE(absl::StrContains(what[1], "rank 0 is in collective #7 while rank 1 is in #8")) << what[1];
}

// With the agreement check off (ZT_COMM_CHECK=0), ranks all-reducing
// different sizes still fail on every rank, naming the disagreement.
ZT_RANK_WORKER(different_sizes_unchecked) {
  ZT_ASSIGN_OR_RETURN(zt::comm::RankEnv env, zt::comm::ReadRankEnv());
  zt::comm::GroupOptions options;
  options.backend = zt::comm::BackendChoice::kShm;
  options.check_agreement = false;
  options.timeout = std::chrono::seconds(20);
  ZT_ASSIGN_OR_RETURN(auto g, zt::comm::InitProcessGroup(env, options));
  at::Tensor t = at::ones({env.rank == 0 ? 64 : 128});
  absl::Status st = g->AllReduce(t, zt::comm::ReduceOp::kSum)->Wait();
  std::printf("rank %d: %s\n", env.rank, st.ToString().c_str());
  if (st.ok() || !absl::StrContains(st.message(), "ranks disagree in shared memory")) {
    return absl::InternalError(absl::StrCat("expected the disagreement, got ", st.ToString()));
  }
  return absl::OkStatus();
}

TEST(ShmChoice, DifferentSizesFailWithTheCheckOff) {
  auto result = zt::testing::RunRanks("different_sizes_unchecked", {.world_size = 2});
  EXPECT_TRUE(result.ok()) << result.Summary();
}

TEST(ShmSegment, DeadPeerIsNamed) {
  auto seg = ShmSegment::Create(2, 4096);
  ASSERT_TRUE(seg.ok()) << seg.status();
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  int status = 0;
  waitpid(child, &status, 0);  // gone now
  (*seg)->SetPid(0, getpid());
  (*seg)->SetPid(1, child);
  const auto start = Clock::now();
  try {
    (*seg)->Barrier(0, 0, 1, start + std::chrono::seconds(30), {4, 7}, std::chrono::seconds(30));
    FAIL() << "the barrier passed without its peer";
  } catch (const zt::comm::TransportError& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kUnavailable);
    EXPECT_TRUE(absl::StrContains(e.what(), absl::StrCat("peer rank 7 (pid ", child, ") exited"))) << e.what();
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
}

// /dev/shm of 64 KiB, a segment of a few MiB.
TEST(ShmSegment, FullDevShmIsANamedError) {
  const ChildResult r = InPrivateDevShm("64k", [](std::string* msg) {
    auto seg = ShmSegment::Create(2, int64_t{1} << 20);
    *msg = seg.ok() ? "created" : std::string(seg.status().message());
    return !seg.ok() && seg.status().code() == absl::StatusCode::kResourceExhausted;
  });
  if (r.code == 2) GTEST_SKIP() << "no private /dev/shm here (needs root): " << r.msg;
  EXPECT_EQ(r.code, 0) << r.msg;
  EXPECT_TRUE(absl::StrContains(r.msg, "could not reserve 4 MiB of shared memory for 2 ranks")) << r.msg;
  EXPECT_TRUE(absl::StrContains(r.msg, "--shm-size")) << r.msg;
}

// A /dev/shm of 3 MiB: 1 MiB slots for 2 ranks (4 MiB) do not fit, 512 KiB
// ones (2 MiB) do; with a 1 MiB minimum the error stays.
TEST(ShmSegment, SmallDevShmGetsSmallerSlots) {
  const ChildResult r = InPrivateDevShm("3m", [](std::string* msg) {
    auto fitted = ShmSegment::CreateFitting(2, int64_t{1} << 20, int64_t{256} << 10);
    auto refused = ShmSegment::CreateFitting(2, int64_t{1} << 20, int64_t{1} << 20);
    *msg = absl::StrCat(fitted.ok() ? (*fitted)->slot_bytes() : -1, " ",
                        refused.ok() ? std::string("created") : std::string(refused.status().message()));
    return fitted.ok() && !refused.ok();
  });
  if (r.code == 2) GTEST_SKIP() << "no private /dev/shm here (needs root): " << r.msg;
  EXPECT_EQ(r.code, 0) << r.msg;
  EXPECT_TRUE(absl::StartsWith(r.msg, "524288 could not reserve")) << r.msg;
}

// Rank 1 mounts a /dev/shm of its own before joining; arg "shm" or "auto".
ZT_RANK_WORKER(private_dev_shm) {
  ZT_ASSIGN_OR_RETURN(zt::comm::RankEnv env, zt::comm::ReadRankEnv());
  if (env.rank == 1) {
    std::string why;
    // A failure here ends the run; the test skips on the "SKIP: " line.
    if (!PrivateDevShm("16m", &why)) return absl::FailedPreconditionError(absl::StrCat("SKIP: ", why));
  }
  zt::comm::GroupOptions options;
  options.timeout = std::chrono::seconds(20);
  options.rendezvous_timeout = std::chrono::seconds(20);
  if (ctx.arg == "shm") options.backend = zt::comm::BackendChoice::kShm;
  absl::StatusOr<std::shared_ptr<zt::comm::ProcessGroup>> g = zt::comm::InitProcessGroup(env, options);
  if (ctx.arg == "shm") {
    if (g.ok()) return absl::InternalError("ZT_COMM_BACKEND=shm connected although rank 1 has its own /dev/shm");
    std::printf("rank %d: %s\n", env.rank, std::string(g.status().message()).c_str());
    if (!absl::StrContains(g.status().message(), "rank 1: could not open the shared-memory segment")) {
      return absl::InternalError(absl::StrCat("the error does not name rank 1's failure: ", g.status().message()));
    }
    return absl::OkStatus();
  }
  ZT_RETURN_IF_ERROR(g.status());
  if ((*g)->backend_name() != "gloo") {
    return absl::InternalError(absl::StrCat("auto chose ", (*g)->backend_name(), ", want the Gloo fallback"));
  }
  at::Tensor t = at::full({1000}, static_cast<float>(env.rank + 1));
  ZT_RETURN_IF_ERROR((*g)->AllReduce(t, zt::comm::ReduceOp::kSum)->Wait());
  if (t[999].item<float>() != 3.0f) return absl::InternalError("wrong all-reduce after the fallback");
  std::printf("rank %d: fell back to gloo\n", env.rank);
  return absl::OkStatus();
}

void RunPrivate(const std::string& arg) {
  zt::testing::RankRunOptions o;
  o.world_size = 2;
  o.arg = arg;
  o.timeout = std::chrono::seconds(60);
  o.extra_env["ZT_LOG_LEVEL"] = "warning";
  auto result = zt::testing::RunRanks("private_dev_shm", o);
  if (absl::StrContains(result.Summary(), "SKIP: ")) GTEST_SKIP() << result.Summary();
  EXPECT_TRUE(result.ok()) << result.Summary();
}

TEST(ShmChoice, AutoFallsBackToGlooWhenARankCannotMapTheSegment) { RunPrivate("auto"); }
TEST(ShmChoice, ExplicitShmFailsOnEveryRankNamingTheRank) { RunPrivate("shm"); }

// Connected groups leave no name in /dev/shm: the segment lives only in the
// ranks' mappings, so a crash cannot leak it.
ZT_RANK_WORKER(no_leftover_name) {
  ZT_ASSIGN_OR_RETURN(zt::comm::RankEnv env, zt::comm::ReadRankEnv());
  ZT_ASSIGN_OR_RETURN(auto g, zt::comm::InitProcessGroup(env, {}));
  if (g->backend_name() != "shm") return absl::InternalError(absl::StrCat("backend ", g->backend_name()));
  ZT_RETURN_IF_ERROR(g->Barrier()->Wait());
  for (const std::string& n : ZtSegments()) {
    if (absl::StartsWith(n, absl::StrCat("zt-", getpid(), "-"))) {  // rank 0 names its segment after its pid
      return absl::InternalError(absl::StrCat("/dev/shm/", n, " is still there"));
    }
  }
  return absl::OkStatus();
}

TEST(ShmChoice, ConnectedGroupsLeaveNoNameBehind) {
  auto result = zt::testing::RunRanks("no_leftover_name", {.world_size = 3});
  EXPECT_TRUE(result.ok()) << result.Summary();
}

}  // namespace

int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }
