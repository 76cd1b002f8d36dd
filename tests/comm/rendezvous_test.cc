// comm/rendezvous.h in one process, ranks as threads over a real TCPStore on
// 127.0.0.1: a rank of another job that finds this job's store on the same
// MASTER_PORT is refused by name, and so is a second process claiming a rank
// that already joined.
#include "comm/rendezvous.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>

#include "absl/strings/match.h"
#include "comm/free_port.h"

namespace zt::comm {
namespace {

RankEnv Env(int rank, int world, int port, const std::string& job) {
  RankEnv env;
  env.rank = rank;
  env.world_size = world;
  env.local_rank = rank;
  env.local_world_size = world;
  env.master_addr = "127.0.0.1";
  env.master_port = port;
  env.source = "test";
  env.job_id = job;
  return env;
}

TEST(Rendezvous, RankOfAnotherJobIsRefused) {
  absl::StatusOr<int> port = PickFreePort("127.0.0.1");
  ASSERT_TRUE(port.ok()) << port.status();
  const auto timeout = std::chrono::seconds(20);
  // Job A's rank 0 hosts the store; job B's rank 1 reaches it first: refused
  // at once, without taking rank 1's slot.
  auto host = std::async(std::launch::async, [&] { return Rendezvous(Env(0, 2, *port, "job-a"), timeout); });
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<StoreHandle> foreign = Rendezvous(Env(1, 2, *port, "job-b"), timeout);
  ASSERT_FALSE(foreign.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - started, timeout / 2);
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kFailedPrecondition) << foreign.status();
  EXPECT_TRUE(absl::StrContains(foreign.status().message(),
                                "rank 1 of job job-b reached the rendezvous store of job "
                                "job-a"))
      << foreign.status();
  EXPECT_TRUE(absl::StrContains(foreign.status().message(), "own MASTER_PORT")) << foreign.status();

  // Job A's own rank 1 then joins: job A trains, job B stopped.
  absl::StatusOr<StoreHandle> own = Rendezvous(Env(1, 2, *port, "job-a"), timeout);
  EXPECT_TRUE(own.ok()) << own.status();
  absl::StatusOr<StoreHandle> h = host.get();
  EXPECT_TRUE(h.ok()) << h.status();
}

// Two processes started with the same RANK: the second is refused, naming
// the first, instead of overwriting its entry.
TEST(Rendezvous, SecondProcessWithTheSameRankIsRefused) {
  absl::StatusOr<int> port = PickFreePort("127.0.0.1");
  ASSERT_TRUE(port.ok()) << port.status();
  const auto timeout = std::chrono::seconds(20);
  auto host = std::async(std::launch::async, [&] { return Rendezvous(Env(0, 2, *port, "job-a"), timeout); });
  absl::StatusOr<StoreHandle> first = Rendezvous(Env(1, 2, *port, "job-a"), timeout);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<StoreHandle> h = host.get();
  ASSERT_TRUE(h.ok()) << h.status();
  absl::StatusOr<StoreHandle> second = Rendezvous(Env(1, 2, *port, "job-a"), timeout);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists) << second.status();
  EXPECT_TRUE(absl::StrContains(second.status().message(), "rank 1 is already taken")) << second.status();
  EXPECT_TRUE(absl::StrContains(second.status().message(), "job=job-a")) << second.status();
}

// Two jobs started by hand on one port, without ZT_JOB_ID: their ranks are
// named by their command lines, so another job's rank is refused, and the
// error says how to join ranks whose command lines differ on purpose.
TEST(Rendezvous, HandStartedJobsAreToldApartByTheirCommandLines) {
  absl::StatusOr<int> port = PickFreePort("127.0.0.1");
  ASSERT_TRUE(port.ok()) << port.status();
  const auto timeout = std::chrono::seconds(20);
  const std::string a = CommandLineJobId({"zt", "train", "--config", "a.json"});
  const std::string b = CommandLineJobId({"zt", "train", "--config", "b.json"});
  auto host = std::async(std::launch::async, [&] { return Rendezvous(Env(0, 2, *port, a), timeout); });
  absl::StatusOr<StoreHandle> foreign = Rendezvous(Env(1, 2, *port, b), timeout);
  ASSERT_FALSE(foreign.ok());
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kFailedPrecondition) << foreign.status();
  EXPECT_TRUE(absl::StrContains(foreign.status().message(), "set the same ZT_JOB_ID on every rank"))
      << foreign.status();
  absl::StatusOr<StoreHandle> own = Rendezvous(Env(1, 2, *port, a), timeout);
  EXPECT_TRUE(own.ok()) << own.status();
  absl::StatusOr<StoreHandle> h = host.get();
  EXPECT_TRUE(h.ok()) << h.status();
}

TEST(Rendezvous, SameJobJoins) {
  absl::StatusOr<int> port = PickFreePort("127.0.0.1");
  ASSERT_TRUE(port.ok()) << port.status();
  const auto timeout = std::chrono::seconds(20);
  auto host = std::async(std::launch::async, [&] { return Rendezvous(Env(0, 2, *port, "job-a"), timeout); });
  absl::StatusOr<StoreHandle> peer = Rendezvous(Env(1, 2, *port, "job-a"), timeout);
  EXPECT_TRUE(peer.ok()) << peer.status();
  absl::StatusOr<StoreHandle> h = host.get();
  EXPECT_TRUE(h.ok()) << h.status();
}

}  // namespace
}  // namespace zt::comm
