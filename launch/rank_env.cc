// Implementation of launch/rank_env.h: table of launcher conventions, integer
// parsing with messages that name the variable, and MASTER_ADDR/PORT checks.
#include "launch/rank_env.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "util/fnv1a.h"
#include "util/status.h"

namespace zt::comm {
namespace {

struct Convention {
  const char* name;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;  // nullptr: derived (SLURM)
};

constexpr Convention kConventions[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"MPICH/PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"SLURM", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
};

std::optional<std::string> Get(const EnvLookup& getenv, const char* name) {
  if (name == nullptr) return std::nullopt;
  std::optional<std::string> v = getenv(name);
  if (!v.has_value()) return std::nullopt;
  std::string trimmed(absl::StripAsciiWhitespace(*v));
  return trimmed;
}

absl::StatusOr<int> ParseInt(const std::string& name, const std::string& value, int min_value, int max_value,
                             const std::string& hint) {
  int parsed = 0;
  if (!absl::SimpleAtoi(value, &parsed)) {
    return absl::InvalidArgumentError(absl::StrCat(name, "='", value, "' is not an integer: ", hint));
  }
  if (parsed < min_value || parsed > max_value) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "=", parsed, " is out of range [", min_value, ", ", max_value, "]: ", hint));
  }
  return parsed;
}

// SLURM_TASKS_PER_NODE looks like "2(x3),1": nodes 0-2 run 2 tasks, node 3 runs 1.
absl::StatusOr<int> SlurmTasksOnNode(const std::string& spec, int node_id) {
  int node = 0;
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    int tasks = 0;
    int repeat = 1;
    size_t paren = part.find('(');
    absl::string_view count = part.substr(0, paren);
    if (!absl::SimpleAtoi(count, &tasks)) break;
    if (paren != absl::string_view::npos) {
      absl::string_view rep = part.substr(paren + 1);  // "x3)"
      if (rep.size() < 3 || rep.front() != 'x' || rep.back() != ')' ||
          !absl::SimpleAtoi(rep.substr(1, rep.size() - 2), &repeat)) {
        break;
      }
    }
    if (node_id < node + repeat) return tasks;
    node += repeat;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("SLURM_TASKS_PER_NODE='", spec, "' does not describe node SLURM_NODEID=", node_id,
                   ": run under srun, or set LOCAL_RANK and LOCAL_WORLD_SIZE with RANK and WORLD_SIZE"));
}

absl::Status ReadMaster(const EnvLookup& getenv, RankEnv& env) {
  std::optional<std::string> addr = Get(getenv, "MASTER_ADDR");
  std::optional<std::string> port = Get(getenv, "MASTER_PORT");
  const bool multi = env.world_size > 1;
  if (addr.has_value() && !addr->empty()) {
    env.master_addr = *addr;
  } else if (multi) {
    return absl::InvalidArgumentError(
        absl::StrCat("MASTER_ADDR is not set (world size ", env.world_size, " via ", env.source,
                     "): set MASTER_ADDR to the host name or IP address of rank 0, the same on every rank"));
  }
  if (port.has_value() && !port->empty()) {
    ZT_ASSIGN_OR_RETURN(env.master_port, ParseInt("MASTER_PORT", *port, multi ? 1 : 0, 65535,
                                                  "set MASTER_PORT to a free TCP port on rank 0's host (1-65535), "
                                                  "the same on every rank"));
  } else if (multi) {
    return absl::InvalidArgumentError(
        absl::StrCat("MASTER_PORT is not set (world size ", env.world_size, " via ", env.source,
                     "): set MASTER_PORT to a free TCP port on rank 0's host, the same on every rank"));
  }
  std::optional<std::string> agent_store = Get(getenv, "TORCHELASTIC_USE_AGENT_STORE");
  env.agent_hosts_store = multi && agent_store.has_value() && *agent_store == "True";
  if (std::optional<std::string> job = Get(getenv, "ZT_JOB_ID"); job.has_value() && !job->empty()) {
    env.job_id = *job;
  } else if (std::optional<std::string> run = Get(getenv, "TORCHELASTIC_RUN_ID"); run.has_value()) {
    env.job_id = *run;
  }
  if (std::optional<std::string> count = Get(getenv, "TORCHELASTIC_RESTART_COUNT"); count && !count->empty()) {
    ZT_ASSIGN_OR_RETURN(env.restart_count, ParseInt("TORCHELASTIC_RESTART_COUNT", *count, 0, 1 << 30,
                                                    "it is the launcher's attempt number (0, 1, ...); unset it"));
  }
  if (std::optional<std::string> most = Get(getenv, "TORCHELASTIC_MAX_RESTARTS"); most && !most->empty()) {
    ZT_ASSIGN_OR_RETURN(env.max_restarts, ParseInt("TORCHELASTIC_MAX_RESTARTS", *most, 0, 1 << 30,
                                                   "it is the launcher's restart limit (>= 0); unset it"));
  }
  return absl::OkStatus();
}

// Reads the convention's rank and world size into env.rank and
// env.world_size; an error names the variable that is missing or wrong.
absl::Status ReadRankAndSize(const EnvLookup& getenv, const Convention& c, RankEnv& env) {
  std::optional<std::string> rank = Get(getenv, c.rank);
  std::optional<std::string> size = Get(getenv, c.size);
  if (!size.has_value() && !rank.has_value()) {
    const char* present = Get(getenv, c.local_rank) ? c.local_rank : c.local_size;
    return absl::InvalidArgumentError(absl::StrCat(present, " is set but ", c.rank, " and ", c.size, " are not: set ",
                                                   c.rank, " and ", c.size, " (", c.name, " convention), or unset ",
                                                   present, " for a single rank"));
  }
  if (!size.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(c.rank, rank ? absl::StrCat(" is set (", *rank, ")") : std::string(" is not set"), " but ", c.size,
                     " is not: set ", c.size, " to the number of ranks (", c.name, " convention)"));
  }
  const std::string size_hint = absl::StrCat("set ", c.size, " to the number of ranks (>= 1)");
  ZT_ASSIGN_OR_RETURN(env.world_size, ParseInt(c.size, *size, 1, 1 << 20, size_hint));
  if (!rank.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(c.size, " is set (", *size, ") but ", c.rank, " is not: set ",
                                                   c.rank, " to this process's rank in [0, ", env.world_size, ")"));
  }
  ZT_ASSIGN_OR_RETURN(env.rank, ParseInt(c.rank, *rank, 0, env.world_size - 1,
                                         absl::StrCat("set ", c.rank, " to this process's rank in [0, ", env.world_size,
                                                      ") (", c.size, "=", env.world_size, ")")));
  return absl::OkStatus();
}

// Local size: named variable, or SLURM's per-node task list; without either,
// one host (the world size). Returns whether a variable gave it. Needs
// env.world_size.
absl::StatusOr<bool> ReadLocalSize(const EnvLookup& getenv, const Convention& c, RankEnv& env) {
  std::optional<std::string> local_size = Get(getenv, c.local_size);
  bool have_local_size = false;
  if (local_size.has_value()) {
    ZT_ASSIGN_OR_RETURN(env.local_world_size,
                        ParseInt(c.local_size, *local_size, 1, env.world_size,
                                 absl::StrCat("set ", c.local_size, " to the number of ranks on this host (1..", c.size,
                                              "=", env.world_size, ")")));
    have_local_size = true;
  } else if (c.local_size == nullptr) {  // SLURM
    std::optional<std::string> per_node = Get(getenv, "SLURM_NTASKS_PER_NODE");
    std::optional<std::string> tasks = Get(getenv, "SLURM_TASKS_PER_NODE");
    int parsed = 0;
    if (per_node.has_value() && absl::SimpleAtoi(*per_node, &parsed) && parsed >= 1) {
      env.local_world_size = parsed;
      have_local_size = true;
    } else if (tasks.has_value()) {
      int node_id = 0;
      if (std::optional<std::string> id = Get(getenv, "SLURM_NODEID")) {
        ZT_ASSIGN_OR_RETURN(node_id,
                            ParseInt("SLURM_NODEID", *id, 0, 1 << 20, "expected the node index within the job"));
      }
      ZT_ASSIGN_OR_RETURN(env.local_world_size, SlurmTasksOnNode(*tasks, node_id));
      have_local_size = true;
    }
  }
  if (!have_local_size) env.local_world_size = env.world_size;  // assume one host
  if (env.local_world_size > env.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("local world size ", env.local_world_size, " is larger than the world size ", env.world_size, " (",
                     c.name, "): check ", c.local_size ? c.local_size : "SLURM_TASKS_PER_NODE", " and ", c.size));
  }
  return have_local_size;
}

// Local rank: the named variable, or the rank itself on a single host.
// Needs the rank and local size read first.
absl::Status ReadLocalRank(const EnvLookup& getenv, const Convention& c, bool have_local_size, RankEnv& env) {
  std::optional<std::string> local_rank = Get(getenv, c.local_rank);
  if (local_rank.has_value()) {
    ZT_ASSIGN_OR_RETURN(env.local_rank,
                        ParseInt(c.local_rank, *local_rank, 0, env.local_world_size - 1,
                                 absl::StrCat("set ", c.local_rank, " to this process's index on its host, in [0, ",
                                              env.local_world_size, ")")));
  } else if (!have_local_size || env.local_world_size == env.world_size) {
    env.local_rank = env.rank;  // single host: local rank == rank
  } else {
    return absl::InvalidArgumentError(absl::StrCat(c.local_rank, " is not set but the job spans several hosts (",
                                                   env.local_world_size, " of ", env.world_size, " ranks here): set ",
                                                   c.local_rank));
  }
  return absl::OkStatus();
}

absl::StatusOr<RankEnv> ReadConvention(const EnvLookup& getenv, const Convention& c) {
  RankEnv env;
  env.source = c.name;
  ZT_RETURN_IF_ERROR(ReadRankAndSize(getenv, c, env));
  ZT_ASSIGN_OR_RETURN(const bool have_local_size, ReadLocalSize(getenv, c, env));
  ZT_RETURN_IF_ERROR(ReadLocalRank(getenv, c, have_local_size, env));
  ZT_RETURN_IF_ERROR(ReadMaster(getenv, env));
  return env;
}

}  // namespace

std::string RankEnv::DebugString() const {
  std::string s =
      absl::StrCat("rank ", rank, "/", world_size, " (local ", local_rank, "/", local_world_size, ") via ", source);
  if (world_size > 1) absl::StrAppend(&s, ", rendezvous ", master_addr, ":", master_port);
  return s;
}

absl::StatusOr<RankEnv> ReadRankEnv(const EnvLookup& getenv) {
  for (const Convention& c : kConventions) {
    const char* names[] = {c.rank, c.size, c.local_rank, c.local_size};
    bool present = false;
    for (const char* n : names) present = present || Get(getenv, n).has_value();
    // SLURM's local id alone (e.g. inside an allocation, outside srun) is not
    // a launch; require SLURM_PROCID or SLURM_NTASKS for that convention.
    if (c.local_size == nullptr) {
      present = Get(getenv, c.rank).has_value();
    }
    if (present) return ReadConvention(getenv, c);
  }
  RankEnv env;
  ZT_RETURN_IF_ERROR(ReadMaster(getenv, env));
  return env;
}

std::string NewJobId() {
  std::random_device rd;
  return absl::StrFormat("%08x%08x-%d", rd(), rd(), ::getpid());
}

std::string CommandLineJobId(const std::vector<std::string>& argv) {
  Fnv1a64 h;
  for (size_t i = 1; i < argv.size(); ++i) h.AddString(argv[i]);
  return absl::StrCat(kCommandLineJobPrefix, absl::Hex(h.value(), absl::kZeroPad16));
}

absl::StatusOr<RankEnv> ReadRankEnv() {
  absl::StatusOr<RankEnv> env = ReadRankEnv([](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  });
  // Ranks started without a job id (by hand, mpirun, srun, or zt launch on
  // several nodes) are named by their command line, which is the same on
  // every rank of one job.
  if (env.ok() && env->job_id.empty() && env->world_size > 1) {
    std::ifstream in("/proc/self/cmdline", std::ios::binary);
    std::vector<std::string> argv;
    for (std::string arg; std::getline(in, arg, '\0');) argv.push_back(arg);
    if (!argv.empty()) env->job_id = CommandLineJobId(argv);
  }
  return env;
}

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "ip6-localhost") return true;
  in_addr addr{};
  if (inet_pton(AF_INET, host.c_str(), &addr) == 1) {
    return (ntohl(addr.s_addr) >> 24) == 127;
  }
  return false;
}

}  // namespace zt::comm
