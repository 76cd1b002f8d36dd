// Where this process sits in the job: rank, world size, local rank and the
// rendezvous address, read from the variables launchers already set.
// Pure parsing (no sockets); the rendezvous itself is comm/rendezvous.h.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zt::comm {

struct RankEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;                     // rank among the processes on this host
  int local_world_size = 1;               // processes on this host
  std::string master_addr = "127.0.0.1";  // host of rank 0's store
  int master_port = 0;                    // 0 only for a single rank
  // Which convention the values came from: "torchrun", "Open MPI", "MPICH/PMI",
  // "SLURM" or "none (single rank)".
  std::string source = "none (single rank)";
  // torchrun's agent already hosts the store at MASTER_ADDR:MASTER_PORT
  // (TORCHELASTIC_USE_AGENT_STORE=True): every rank, rank 0 included, connects
  // to it as a client instead of rank 0 starting one.
  bool agent_hosts_store = false;
  // Which job this rank belongs to (ZT_JOB_ID, which zt launch and zt train
  // set for their ranks on one node, else torchrun's TORCHELASTIC_RUN_ID,
  // else, from ReadRankEnv() with more than one rank, CommandLineJobId of
  // this process's command line). The rendezvous refuses a rank of another
  // job that found this job's store on the same MASTER_PORT.
  std::string job_id;
  // Which attempt of a restarted job this is (TORCHELASTIC_RESTART_COUNT, set
  // by zt launch --max-restarts and torchrun; 0 for the first) and how many
  // restarts the job allows (TORCHELASTIC_MAX_RESTARTS; 0 when unset).
  int restart_count = 0;
  int max_restarts = 0;

  // "rank 1/4 (local 1/4) via torchrun, rendezvous 127.0.0.1:29500"
  std::string DebugString() const;
};

// Looks up one environment variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// Reads the rank environment from the first convention that is present:
//   torchrun / zt launch: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE
//   Open MPI:             OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
//   MPICH / Intel MPI:    PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS
//   SLURM (srun):         SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
//                         SLURM_NTASKS_PER_NODE or SLURM_TASKS_PER_NODE + SLURM_NODEID
// plus MASTER_ADDR and MASTER_PORT (required when the world has more than one
// rank, whatever the convention). No variables at all means a single rank.
//
// Errors (InvalidArgument) name the variable to set or fix, e.g. "RANK is set
// (3) but WORLD_SIZE is not: set WORLD_SIZE to the number of ranks".
absl::StatusOr<RankEnv> ReadRankEnv(const EnvLookup& getenv);
absl::StatusOr<RankEnv> ReadRankEnv();  // from this process's environment

// The job id of ranks started without ZT_JOB_ID or TORCHELASTIC_RUN_ID:
// kCommandLineJobPrefix and a 64-bit FNV-1a digest of argv[1..] (argv[0] is
// left out: the same program may sit at another path on another node).
inline constexpr char kCommandLineJobPrefix[] = "command-line-";
std::string CommandLineJobId(const std::vector<std::string>& argv);

// A fresh job id for one launch: 64 random bits and this process's pid
// ("1ebae33f7bfd4f31-10157"); the one-node launcher's and node 0's across
// nodes (launch/node_rounds.h).
std::string NewJobId();

// True for 127.0.0.0/8, ::1 and "localhost".
bool IsLoopbackHost(const std::string& host);

}  // namespace zt::comm
