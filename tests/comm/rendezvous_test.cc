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
#include "launch/free_port.h"

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

// Ranks of two-rank jobs meeting on one free port: Host starts rank 0 of
// `job` in the background, Join runs one rank here.
class RendezvousOnOnePort : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<int> port = PickFreePort("127.0.0.1");
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
  }
  std::future<absl::StatusOr<StoreHandle>> Host(const std::string& job) {
    return std::async(std::launch::async, [this, job] { return Rendezvous(Env(0, 2, port_, job), kTimeout); });
  }
  absl::StatusOr<StoreHandle> Join(int rank, const std::string& job) {
    return Rendezvous(Env(rank, 2, port_, job), kTimeout);
  }
  static constexpr std::chrono::seconds kTimeout{20};
  int port_ = 0;
};

TEST_F(RendezvousOnOnePort, RankOfAnotherJobIsRefused) {
  // Job A's rank 0 hosts the store; job B's rank 1 reaches it first: refused
  // at once, without taking rank 1's slot.
  auto host = Host("job-a");
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<StoreHandle> foreign = Join(1, "job-b");
  ASSERT_FALSE(foreign.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - started, kTimeout / 2);
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kFailedPrecondition) << foreign.status();
  EXPECT_TRUE(absl::StrContains(foreign.status().message(),
                                "rank 1 of job job-b reached the rendezvous store of job "
                                "job-a"))
      << foreign.status();
  EXPECT_TRUE(absl::StrContains(foreign.status().message(), "own MASTER_PORT")) << foreign.status();

  // Job A's own rank 1 then joins: job A trains, job B stopped.
  absl::StatusOr<StoreHandle> own = Join(1, "job-a");
  EXPECT_TRUE(own.ok()) << own.status();
  absl::StatusOr<StoreHandle> h = host.get();
  EXPECT_TRUE(h.ok()) << h.status();
}

// Two processes started with the same RANK: the second is refused, naming
// the first, instead of overwriting its entry.
TEST_F(RendezvousOnOnePort, SecondProcessWithTheSameRankIsRefused) {
  auto host = Host("job-a");
  absl::StatusOr<StoreHandle> first = Join(1, "job-a");
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<StoreHandle> h = host.get();
  ASSERT_TRUE(h.ok()) << h.status();
  absl::StatusOr<StoreHandle> second = Join(1, "job-a");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists) << second.status();
  EXPECT_TRUE(absl::StrContains(second.status().message(), "rank 1 is already taken")) << second.status();
  EXPECT_TRUE(absl::StrContains(second.status().message(), "job=job-a")) << second.status();
}

// Two jobs started by hand on one port, without ZT_JOB_ID: their ranks are
// named by their command lines, so another job's rank is refused, and the
// error says how to join ranks whose command lines differ on purpose.
TEST_F(RendezvousOnOnePort, HandStartedJobsAreToldApartByTheirCommandLines) {
  const std::string a = CommandLineJobId({"zt", "train", "--config", "a.json"});
  const std::string b = CommandLineJobId({"zt", "train", "--config", "b.json"});
  auto host = Host(a);
  absl::StatusOr<StoreHandle> foreign = Join(1, b);
  ASSERT_FALSE(foreign.ok());
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kFailedPrecondition) << foreign.status();
  EXPECT_TRUE(absl::StrContains(foreign.status().message(), "set the same ZT_JOB_ID on every rank"))
      << foreign.status();
  absl::StatusOr<StoreHandle> own = Join(1, a);
  EXPECT_TRUE(own.ok()) << own.status();
  absl::StatusOr<StoreHandle> h = host.get();
  EXPECT_TRUE(h.ok()) << h.status();
}

TEST_F(RendezvousOnOnePort, SameJobJoins) {
  auto host = Host("job-a");
  absl::StatusOr<StoreHandle> peer = Join(1, "job-a");
  EXPECT_TRUE(peer.ok()) << peer.status();
  absl::StatusOr<StoreHandle> h = host.get();
  EXPECT_TRUE(h.ok()) << h.status();
}

}  // namespace
}  // namespace zt::comm
