// torchrun's static rendezvous: its agent hosts the TCPStore at MASTER_PORT
// and tells workers so with TORCHELASTIC_USE_AGENT_STORE=True. Here the test
// process plays the agent; every rank, rank 0 included, must join as a client
// and the group must work. Without the variable, rank 0 tries to host the
// store itself and must say the port is taken.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "absl/strings/str_cat.h"
#include "comm/init.h"
#include "launch/rank_env.h"
#include "tests/testing/ranks.h"
#include "util/status.h"

namespace zt::testing {
namespace {

ZT_RANK_WORKER(agent_store_sum) {
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  comm::GroupOptions options;
  options.rendezvous_timeout = std::chrono::seconds(20);
  ZT_ASSIGN_OR_RETURN(auto pg, comm::InitProcessGroup(env, options));
  torch::Tensor t = torch::full({5}, static_cast<float>(pg->rank() + 1));
  ZT_RETURN_IF_ERROR(pg->AllReduce(t, comm::ReduceOp::kSum)->Wait());
  const float expected = pg->size() * (pg->size() + 1) / 2.0f;
  if (t[0].item<float>() != expected) return absl::InternalError("wrong all-reduce result");
  return absl::OkStatus();
}

c10::intrusive_ptr<c10d::TCPStore> HostAgentStore() {
  c10d::TCPStoreOptions opts;
  opts.port = 0;  // any free port
  opts.isServer = true;
  opts.waitWorkers = false;
  opts.timeout = std::chrono::seconds(30);
  return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", opts);
}

TEST(AgentStore, RanksJoinTheAgentsStore) {
  auto store = HostAgentStore();
  RankRunOptions o;
  o.world_size = 3;
  o.timeout = std::chrono::seconds(120);
  o.extra_env = {{"MASTER_PORT", std::to_string(store->getPort())}, {"TORCHELASTIC_USE_AGENT_STORE", "True"}};
  RankRunResult r = RunRanks("agent_store_sum", o);
  EXPECT_TRUE(r.ok()) << r.Summary();
}

// The agent's store outlives the attempts of a restarted job (node 0's zt
// launch across nodes keeps it for the whole job): each attempt keys its
// rendezvous and groups under "zt/attempt_<n>", so the ranks of attempt 1
// meet each other and not the keys attempt 0 left.
TEST(AgentStore, EachAttemptMeetsOnlyItsOwnRanks) {
  auto store = HostAgentStore();
  for (int attempt = 0; attempt < 2; ++attempt) {
    RankRunOptions o;
    o.world_size = attempt == 0 ? 3 : 2;  // a restart at a smaller world, as an elastic job's
    o.timeout = std::chrono::seconds(120);
    o.extra_env = {{"MASTER_PORT", std::to_string(store->getPort())},
                   {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                   {"TORCHELASTIC_RESTART_COUNT", std::to_string(attempt)}};
    RankRunResult r = RunRanks("agent_store_sum", o);
    EXPECT_TRUE(r.ok()) << "attempt " << attempt << ": " << r.Summary();
    EXPECT_TRUE(store->check({absl::StrCat("zt/attempt_", attempt, "/rdzv/0")})) << "attempt " << attempt;
  }
  EXPECT_FALSE(store->check({"zt/attempt_1/rdzv/2"})) << "attempt 1 had 2 ranks";
}

TEST(AgentStore, WithoutTheVariableRankZeroReportsThePortInUse) {
  auto store = HostAgentStore();
  RankRunOptions o;
  o.world_size = 2;
  o.timeout = std::chrono::seconds(120);
  o.extra_env = {{"MASTER_PORT", std::to_string(store->getPort())}, {"ZT_RENDEZVOUS_TIMEOUT_S", "5"}};
  RankRunResult r = RunRanks("agent_store_sum", o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.outputs[0].find("could not host the rendezvous store"), std::string::npos) << r.Summary();
}

}  // namespace
}  // namespace zt::testing

int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }
