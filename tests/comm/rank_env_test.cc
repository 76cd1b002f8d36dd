// Table tests of ReadRankEnv (launcher conventions, defaults, and error
// messages that name the variable to fix) and of the group options' env
// overrides.
#include "launch/rank_env.h"

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "comm/group_options.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {

using ::testing::HasSubstr;
using zt::comm::RankEnv;
using zt::comm::ReadRankEnv;

using Env = std::map<std::string, std::string>;

absl::StatusOr<RankEnv> Read(const Env& env) {
  return ReadRankEnv([&](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  });
}

const Env kMaster = {{"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}};

Env With(Env base, const Env& more) {
  for (const auto& [k, v] : more) base[k] = v;
  return base;
}

struct GoodCase {
  const char* name;
  Env env;
  int rank, world, local_rank, local_world;
  const char* source;
};

TEST(RankEnv, ReadsEachConvention) {
  const std::vector<GoodCase> cases = {
      {"nothing set", {}, 0, 1, 0, 1, "none (single rank)"},
      {"torchrun", With(kMaster, {{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"}}),
       5, 8, 1, 4, "torchrun"},
      {"torchrun without local vars", With(kMaster, {{"RANK", "2"}, {"WORLD_SIZE", "3"}}), 2, 3, 2, 3, "torchrun"},
      {"torchrun single rank needs no master", {{"RANK", "0"}, {"WORLD_SIZE", "1"}}, 0, 1, 0, 1, "torchrun"},
      {"whitespace is trimmed", With(kMaster, {{"RANK", " 1 "}, {"WORLD_SIZE", "2\n"}}), 1, 2, 1, 2, "torchrun"},
      {"Open MPI",
       With(kMaster, {{"OMPI_COMM_WORLD_RANK", "3"},
                      {"OMPI_COMM_WORLD_SIZE", "4"},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}),
       3, 4, 1, 2, "Open MPI"},
      {"MPICH", With(kMaster, {{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}}), 1, 2, 1, 2, "MPICH/PMI"},
      {"SLURM with NTASKS_PER_NODE",
       With(kMaster,
            {{"SLURM_PROCID", "6"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "2"}, {"SLURM_NTASKS_PER_NODE", "4"}}),
       6, 8, 2, 4, "SLURM"},
      {"SLURM with TASKS_PER_NODE list",
       With(kMaster, {{"SLURM_PROCID", "6"},
                      {"SLURM_NTASKS", "7"},
                      {"SLURM_LOCALID", "0"},
                      {"SLURM_TASKS_PER_NODE", "3(x2),1"},
                      {"SLURM_NODEID", "2"}}),
       6, 7, 0, 1, "SLURM"},
      {"torchrun wins over SLURM",
       With(kMaster, {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}), 1, 2, 1, 2,
       "torchrun"},
  };
  for (const GoodCase& c : cases) {
    absl::StatusOr<RankEnv> got = Read(c.env);
    ASSERT_TRUE(got.ok()) << c.name << ": " << got.status();
    EXPECT_EQ(got->rank, c.rank) << c.name;
    EXPECT_EQ(got->world_size, c.world) << c.name;
    EXPECT_EQ(got->local_rank, c.local_rank) << c.name;
    EXPECT_EQ(got->local_world_size, c.local_world) << c.name;
    EXPECT_EQ(got->source, c.source) << c.name;
    if (c.world > 1) {
      EXPECT_EQ(got->master_addr, "10.0.0.1") << c.name;
      EXPECT_EQ(got->master_port, 29500) << c.name;
    }
  }
}

struct BadCase {
  const char* name;
  Env env;
  std::vector<const char*> message_parts;
};

TEST(RankEnv, ErrorsNameTheVariableToFix) {
  const std::vector<BadCase> cases = {
      {"RANK without WORLD_SIZE",
       With(kMaster, {{"RANK", "3"}}),
       {"RANK is set (3) but WORLD_SIZE is not", "set WORLD_SIZE"}},
      {"WORLD_SIZE without RANK",
       With(kMaster, {{"WORLD_SIZE", "4"}}),
       {"WORLD_SIZE is set (4) but RANK is not", "[0, 4)"}},
      {"LOCAL_RANK alone",
       {{"LOCAL_RANK", "0"}},
       {"LOCAL_RANK is set but RANK and WORLD_SIZE are not", "set RANK and WORLD_SIZE"}},
      {"rank >= world",
       With(kMaster, {{"RANK", "4"}, {"WORLD_SIZE", "4"}}),
       {"RANK=4 is out of range [0, 3]", "WORLD_SIZE=4"}},
      {"non-numeric rank", With(kMaster, {{"RANK", "one"}, {"WORLD_SIZE", "4"}}), {"RANK='one' is not an integer"}},
      {"zero world", With(kMaster, {{"RANK", "0"}, {"WORLD_SIZE", "0"}}), {"WORLD_SIZE=0 is out of range"}},
      {"local rank too big",
       With(kMaster, {{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}}),
       {"LOCAL_RANK=2 is out of range [0, 1]"}},
      {"local world larger than world",
       With(kMaster, {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "3"}}),
       {"LOCAL_WORLD_SIZE=3 is out of range [1, 2]"}},
      {"missing MASTER_ADDR",
       {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "29500"}},
       {"MASTER_ADDR is not set", "world size 2 via torchrun"}},
      {"missing MASTER_PORT", {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}, {"MASTER_PORT is not set"}},
      {"port out of range",
       {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}},
       {"MASTER_PORT=70000 is out of range [1, 65535]"}},
      {"port not a number",
       {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "http"}},
       {"MASTER_PORT='http' is not an integer"}},
      {"Open MPI without size",
       With(kMaster, {{"OMPI_COMM_WORLD_RANK", "1"}}),
       {"OMPI_COMM_WORLD_SIZE is not", "Open MPI"}},
      {"SLURM without NTASKS", With(kMaster, {{"SLURM_PROCID", "1"}}), {"SLURM_NTASKS is not"}},
      {"SLURM multi-node without local id",
       With(kMaster, {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}, {"SLURM_NTASKS_PER_NODE", "2"}}),
       {"SLURM_LOCALID is not set but the job spans several hosts"}},
      {"SLURM bad task list",
       With(kMaster, {{"SLURM_PROCID", "1"},
                      {"SLURM_NTASKS", "4"},
                      {"SLURM_LOCALID", "1"},
                      {"SLURM_TASKS_PER_NODE", "2"},
                      {"SLURM_NODEID", "5"}}),
       {"SLURM_TASKS_PER_NODE='2' does not describe node SLURM_NODEID=5"}},
  };
  for (const BadCase& c : cases) {
    absl::StatusOr<RankEnv> got = Read(c.env);
    ASSERT_FALSE(got.ok()) << c.name << " was accepted: " << got->DebugString();
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    for (const char* part : c.message_parts) {
      EXPECT_THAT(std::string(got.status().message()), HasSubstr(part)) << c.name;
    }
  }
}

TEST(RankEnv, DebugStringAndLoopback) {
  absl::StatusOr<RankEnv> env = Read(With(kMaster, {{"RANK", "1"}, {"WORLD_SIZE", "4"}}));
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->DebugString(), "rank 1/4 (local 1/4) via torchrun, rendezvous 10.0.0.1:29500");
  EXPECT_TRUE(zt::comm::IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(zt::comm::IsLoopbackHost("127.1.2.3"));
  EXPECT_TRUE(zt::comm::IsLoopbackHost("localhost"));
  EXPECT_TRUE(zt::comm::IsLoopbackHost("::1"));
  EXPECT_FALSE(zt::comm::IsLoopbackHost("10.0.0.1"));
  EXPECT_FALSE(zt::comm::IsLoopbackHost("node7"));
}

// Sets environment variables for one test and restores them afterwards.
class ScopedEnv {
 public:
  explicit ScopedEnv(const Env& vars) {
    for (const auto& [k, v] : vars) {
      const char* old = std::getenv(k.c_str());
      saved_[k] = old ? std::optional<std::string>(old) : std::nullopt;
      setenv(k.c_str(), v.c_str(), 1);
    }
  }
  ~ScopedEnv() {
    for (const auto& [k, v] : saved_) {
      if (v) {
        setenv(k.c_str(), v->c_str(), 1);
      } else {
        unsetenv(k.c_str());
      }
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

TEST(GroupOptions, EnvironmentOverrides) {
  ScopedEnv env({{"ZT_COMM_TIMEOUT_S", "2.5"},
                 {"ZT_RENDEZVOUS_TIMEOUT_S", "7"},
                 {"ZT_COMM_BACKEND", "gloo"},
                 {"ZT_COMM_THREADS", "3"},
                 {"ZT_COMM_HEARTBEAT_S", "0.25"},
                 {"ZT_REDUCE_SCATTER_ALGO", "ring"}});
  zt::comm::GroupOptions o;
  ASSERT_TRUE(zt::comm::ApplyEnvOverrides(o).ok());
  EXPECT_EQ(o.timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(o.rendezvous_timeout, std::chrono::seconds(7));
  EXPECT_EQ(o.backend, zt::comm::BackendChoice::kGloo);
  EXPECT_EQ(o.worker_threads, 3);
  EXPECT_EQ(o.heartbeat_interval, std::chrono::milliseconds(250));
  EXPECT_EQ(o.reduce_scatter_algorithm, zt::comm::ReduceScatterAlgorithm::kRing);
}

TEST(GroupOptions, BadOverridesAreNamed) {
  const std::vector<std::pair<Env, const char*>> cases = {
      {{{"ZT_COMM_TIMEOUT_S", "soon"}}, "ZT_COMM_TIMEOUT_S='soon' is not a positive number"},
      {{{"ZT_COMM_TIMEOUT_S", "-1"}}, "ZT_COMM_TIMEOUT_S='-1'"},
      {{{"ZT_COMM_BACKEND", "nccl"}}, "ZT_COMM_BACKEND='nccl' is not one of auto, gloo, shm, single"},
      {{{"ZT_COMM_THREADS", "0"}}, "ZT_COMM_THREADS='0' is not an integer in [1, 64]"},
      {{{"ZT_REDUCE_SCATTER_ALGO", "tree"}}, "ZT_REDUCE_SCATTER_ALGO='tree'"},
  };
  for (const auto& [vars, message] : cases) {
    ScopedEnv env(vars);
    zt::comm::GroupOptions o;
    absl::Status s = zt::comm::ApplyEnvOverrides(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(std::string(s.message()), HasSubstr(message));
  }
}

}  // namespace

namespace {

TEST(RankEnv, TorchrunAgentStore) {
  const Env torchrun = With(kMaster, {{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  auto plain = Read(torchrun);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->agent_hosts_store);
  auto agent = Read(With(torchrun, {{"TORCHELASTIC_USE_AGENT_STORE", "True"}}));
  ASSERT_TRUE(agent.ok()) << agent.status();
  EXPECT_TRUE(agent->agent_hosts_store);
  auto other = Read(With(torchrun, {{"TORCHELASTIC_USE_AGENT_STORE", "False"}}));
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->agent_hosts_store);
}

// Ranks started without a job id are named by their command line: the same
// for the same arguments whatever the program's path, different for any
// other argument (and for arguments split differently).
TEST(RankEnv, CommandLineJobId) {
  using zt::comm::CommandLineJobId;
  const std::string a = CommandLineJobId({"/opt/zt/bin/zt", "train", "--config", "a.json"});
  EXPECT_EQ(a, CommandLineJobId({"./zt", "train", "--config", "a.json"}));
  EXPECT_NE(a, CommandLineJobId({"zt", "train", "--config", "b.json"}));
  EXPECT_NE(CommandLineJobId({"zt", "ab", "c"}), CommandLineJobId({"zt", "a", "bc"}));
  EXPECT_EQ(a.rfind(zt::comm::kCommandLineJobPrefix, 0), 0u) << a;
  EXPECT_EQ(a.size(), std::string(zt::comm::kCommandLineJobPrefix).size() + 16) << a;

  // This process's own environment, as a rank started by hand: its id is
  // its own command line's (gtest keeps the original argv).
  for (const char* v : {"ZT_JOB_ID", "TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    ::unsetenv(v);
  }
  ::setenv("RANK", "1", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", "29999", 1);
  auto env = ReadRankEnv();
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->job_id, CommandLineJobId(::testing::internal::GetArgvs()));
  ::setenv("ZT_JOB_ID", "given", 1);
  env = ReadRankEnv();
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->job_id, "given");
  for (const char* v : {"ZT_JOB_ID", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) ::unsetenv(v);
}

}  // namespace
