// `zt launch`: starts this node's ranks of a distributed job (launch/launcher.h)
// with torchrun's environment variables. Flags are checked here, before any
// process starts; the launcher library does the process work.
#include <cmath>
#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "apps/commands.h"
#include "ckpt/memory_copies.h"
#include "cli/flags.h"
#include "launch/launcher.h"
#include "launch/memory_copies_dir.h"
#include "launch/node_rounds.h"
#include "launch/restarts.h"

namespace zt::cli {
namespace {

constexpr char kSynopsis[] =
    "--nproc-per-node N [--nnodes M|MIN:MAX --node-rank R --master-addr A --master-port P] "
    "[--timeout S] [--max-restarts K] [--memory-copies] [--join-timeout S] [--last-call S] -- COMMAND ARGS...";

constexpr char kDescription[] =
    "\nStarts N ranks of COMMAND on this node with RANK, WORLD_SIZE, LOCAL_RANK,\n"
    "LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, GROUP_RANK/NODE_RANK set (torchrun's\n"
    "names) and OMP_NUM_THREADS = cores / N unless already set. Each output line is\n"
    "prefixed with \"[rank R] \". SIGINT/SIGTERM are forwarded to the ranks. When a\n"
    "rank fails, the others are stopped and zt launch exits with that rank's code\n"
    "(128 + signal for a signal, 124 at --timeout).\n"
    "\n--max-restarts K: after a rank fails, start all ranks again, up to K times, with\n"
    "TORCHELASTIC_RESTART_COUNT set to the attempt (zt train then resumes from its\n"
    "checkpoint's `latest`). Not restarted: a rank exiting with code 2 (a usage or\n"
    "configuration error), --timeout, or zt launch itself interrupted.\n"
    "\n--memory-copies: the ranks keep their last checkpoint's files in this node's\n"
    "memory (/dev/shm), and on several nodes each rank also one neighbour's (the same\n"
    "local rank on the next node), so a restart reads them from memory and reads the\n"
    "disk only for what no copy holds (docs/checkpoints.md). Removed at the job's end.\n"
    "\nSeveral nodes: run zt launch on each node with the same --nnodes, --master-addr\n"
    "(an address of node 0) and --master-port, and --node-rank 0..M-1. With\n"
    "--max-restarts or --nnodes MIN:MAX the launchers agree on every attempt through\n"
    "node 0's store at --master-addr:--master-port: a failure on one node stops every\n"
    "node's ranks and all restart together; with MIN:MAX, the nodes that come back\n"
    "within --last-call seconds (once MIN have) go on at the world size they make,\n"
    "and a node that comes later joins at the next restart. Node 0 must stay up.\n";

absl::Status BadFlag(const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("zt launch: ", message, "\nusage: zt launch ", kSynopsis));
}

// Whether the launchers of several nodes must agree on each attempt
// (launch/node_rounds.h): restarts or an elastic range across nodes.
struct NodeAgreement {
  bool needed = false;
  comm::NodeRoundOptions rounds;
};

absl::Status ToOptions(const Flags& flags, comm::LaunchOptions* o, comm::RestartOptions* restart,
                       NodeAgreement* agreement) {
  if (!flags.positional().empty()) {
    return BadFlag(absl::StrCat("unexpected argument '", flags.positional().front(),
                                "' before '--'; put the command to run after '--'"));
  }
  if (flags.rest().empty()) {
    return BadFlag("missing the command to run: end the options with '--' and give the command after it");
  }
  long long nproc = flags.GetInt("nproc-per-node");
  int min_nodes = 1, max_nodes = 1;
  if (absl::Status st = comm::ParseNodeRange(flags.GetString("nnodes"), &min_nodes, &max_nodes); !st.ok()) {
    return BadFlag(std::string(st.message()));
  }
  const long long nnodes = max_nodes;
  const bool elastic = min_nodes < max_nodes;
  long long node_rank = flags.GetInt("node-rank");
  long long port = flags.GetInt("master-port");
  if (!flags.WasSet("nproc-per-node")) {
    return BadFlag("--nproc-per-node N is required: the number of ranks to start on this node");
  }
  if (nproc < 1 || nproc > 4096) return BadFlag(absl::StrCat("--nproc-per-node must be in [1, 4096], got ", nproc));
  if (node_rank < 0 || node_rank >= nnodes) {
    return BadFlag(absl::StrCat("--node-rank must be in [0, ", nnodes - 1, "] with --nnodes ",
                                flags.GetString("nnodes"), ", got ", node_rank));
  }
  if (flags.WasSet("master-port") && (port < 1 || port > 65535)) {
    return BadFlag(absl::StrCat("--master-port must be in [1, 65535], got ", port,
                                " (leave it out on a single node to pick a free port)"));
  }
  if (nnodes > 1) {
    if (!flags.WasSet("master-addr")) {
      return BadFlag(absl::StrCat("--nnodes ", nnodes,
                                  " needs --master-addr: an address of node 0 that every node "
                                  "can reach (the same on every node)"));
    }
    if (!flags.WasSet("master-port")) {
      return BadFlag(absl::StrCat("--nnodes ", nnodes,
                                  " needs --master-port: a free TCP port on node 0, the same "
                                  "on every node (for example --master-port 29500)"));
    }
  }
  double timeout = flags.GetDouble("timeout");
  if (!(timeout >= 0 && timeout <= 1e9)) {
    return BadFlag(absl::StrCat("--timeout must be a number of seconds >= 0 (0: no limit), got ", timeout));
  }
  double grace = flags.GetDouble("kill-grace");
  if (!(grace >= 0 && grace <= 3600)) {
    return BadFlag(absl::StrCat("--kill-grace must be in [0, 3600] seconds, got ", grace));
  }

  o->nproc_per_node = static_cast<int>(nproc);
  o->nnodes = static_cast<int>(nnodes);
  o->node_rank = static_cast<int>(node_rank);
  if (flags.WasSet("master-addr")) o->master_addr = flags.GetString("master-addr");
  o->master_port = static_cast<int>(port);
  o->command = flags.rest();
  o->prefix_output = !flags.GetBool("no-prefix");
  if (timeout > 0) {
    o->timeout = std::chrono::milliseconds(static_cast<long long>(std::ceil(timeout * 1000.0)));
  }
  o->kill_grace = std::chrono::milliseconds(static_cast<long long>(std::ceil(grace * 1000.0)));
  const long long restarts = flags.GetInt("max-restarts");
  if (restarts < 0 || restarts > 100000) {
    return BadFlag(absl::StrCat("--max-restarts must be in [0, 100000], got ", restarts));
  }
  restart->max_restarts = static_cast<int>(restarts);
  restart->who = "zt launch";
  agreement->needed = nnodes > 1 && (restarts > 0 || elastic);
  agreement->rounds.min_nodes = min_nodes;
  agreement->rounds.max_nodes = max_nodes;
  agreement->rounds.max_restarts = static_cast<int>(restarts);
  agreement->rounds.memory_copies = flags.GetBool("memory-copies");
  if (flags.GetBool("memory-copies") && restarts == 0 && !elastic) {
    return BadFlag(
        "--memory-copies serves restarts (the copies go when the job ends): add --max-restarts K or --nnodes MIN:MAX");
  }
  for (const char* name : {"join-timeout", "last-call"}) {
    const double seconds = flags.GetDouble(name);
    if (!(seconds > 0 && seconds <= 1e6)) {
      return BadFlag(absl::StrCat("--", name, " must be a number of seconds in (0, 1e6], got ", seconds));
    }
    if (flags.WasSet(name) && !agreement->needed) {
      return BadFlag(absl::StrCat("--", name,
                                  " applies only where the launchers of several nodes agree on each attempt "
                                  "(--nnodes > 1 with --max-restarts, or --nnodes MIN:MAX)"));
    }
    const auto ms = std::chrono::milliseconds(static_cast<long long>(std::ceil(seconds * 1000.0)));
    (std::string(name) == "join-timeout" ? agreement->rounds.join_timeout : agreement->rounds.last_call) = ms;
  }
  return comm::ValidateLaunchOptions(*o);
}

}  // namespace

int RunLaunchCommand(const std::vector<std::string>& args, const LaunchBackends& backends) {
  Flags flags("zt launch");
  flags.Int("nproc-per-node", 0, "ranks to start on this node; required");
  flags.String("nnodes", "1", "number of nodes, each running zt launch; MIN:MAX goes on with fewer nodes");
  flags.Int("node-rank", 0, "this node's index in [0, nnodes)");
  flags.String("master-addr", "", "address of node 0, where rank 0 hosts the rendezvous (default 127.0.0.1)");
  flags.Int("master-port", 0, "TCP port on node 0 for the rendezvous; 0 picks a free one (single node only)");
  flags.Double("timeout", 0, "stop every rank after this many seconds and exit 124 (0: no limit)");
  flags.Double("kill-grace", 5, "seconds between SIGTERM and SIGKILL when stopping ranks");
  flags.Bool("no-prefix", "do not prefix output lines with [rank R]");
  flags.Int("max-restarts", 0, "after a rank fails, start the job again up to this many times");
  flags.Bool("memory-copies", "keep the last checkpoint's files in memory too, for restarts (see above)");
  flags.Double("join-timeout", 600, "several nodes with restarts: seconds to wait for MIN nodes to join an attempt");
  flags.Double("last-call", 30, "several nodes with restarts: once MIN have joined, seconds to wait for the rest");
  if (std::optional<int> done = flags.ParseCommandLine(args, kSynopsis, kDescription)) return *done;
  comm::LaunchOptions options;
  comm::RestartOptions restart;
  NodeAgreement agreement;
  if (absl::Status st = ToOptions(flags, &options, &restart, &agreement); !st.ok()) {
    std::string message(st.message());
    if (message.rfind("zt launch: ", 0) != 0) message = absl::StrCat("zt launch: ", message);
    std::fprintf(stderr, "%s\n", message.c_str());
    return 2;
  }
  if (agreement.needed && !backends.store) {
    if (backends.run_in_torch_program) return backends.run_in_torch_program();
    std::fprintf(stderr, "zt launch: restarts across nodes need the launchers' store, which this program lacks\n");
    return 1;
  }
  options.spawn = backends.spawn;
  std::unique_ptr<comm::MemoryCopiesDir> copies;  // removed when this returns
  if (flags.GetBool("memory-copies")) {
    absl::StatusOr<std::unique_ptr<comm::MemoryCopiesDir>> made = comm::MemoryCopiesDir::Create(options.node_rank);
    if (!made.ok()) {
      std::fprintf(stderr, "zt launch: %s\n", std::string(made.status().message()).c_str());
      return 2;
    }
    copies = std::move(*made);
    options.extra_env[ckpt::kMemoryCopiesEnv] = copies->path();
  }
  std::fflush(stdout);  // nothing buffered may reach the ranks' output late
  absl::StatusOr<comm::RestartedLaunch> restarted =
      agreement.needed ? comm::LaunchNodeRounds(options, agreement.rounds, backends.store)
                       : comm::LaunchWithRestarts(options, restart);
  absl::StatusOr<comm::LaunchResult> result =
      restarted.ok() ? absl::StatusOr<comm::LaunchResult>(restarted->last) : restarted.status();
  if (!result.ok()) {
    std::fprintf(stderr, "zt launch: %s\n", std::string(result.status().message()).c_str());
    // Shell conventions: 127 command not found, 126 found but not executable.
    // Across nodes a lost or silent node 0 is a failure (1), not a usage error.
    const absl::StatusCode code = result.status().code();
    if (agreement.needed && (code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kDeadlineExceeded)) {
      return 1;
    }
    switch (code) {
      case absl::StatusCode::kNotFound: return 127;
      case absl::StatusCode::kPermissionDenied:
      case absl::StatusCode::kFailedPrecondition: return 126;
      case absl::StatusCode::kInvalidArgument:
      case absl::StatusCode::kAlreadyExists:
      case absl::StatusCode::kUnavailable: return 2;
      default: return 1;
    }
  }
  if (result->exit_code != 0) std::fprintf(stderr, "zt launch: %s\n", result->failure.c_str());
  return result->exit_code > 255 ? 255 : result->exit_code;
}

}  // namespace zt::cli
