// Restarting a failed job: `zt launch --max-restarts N` and
// `zt train --max-restarts N`, as torchrun's --max-restarts. Launch
// (launch/launcher.h) runs one attempt; this runs attempts until one succeeds
// or a failure is not worth repeating.
//
// Contract
//  - Attempt k (0 first) is Launch(options) with TORCHELASTIC_RESTART_COUNT=k
//    and TORCHELASTIC_MAX_RESTARTS=N in the ranks' environment (torchrun's
//    names: a script resumes from its checkpoint when the count is > 0; zt
//    train does). Every attempt gets a fresh job id and, on one node without
//    a --master-port, a fresh port, so no rank of a restarted attempt can
//    join a store of the one before.
//  - A failed attempt is restarted while restarts remain, unless it timed out
//    (the job's own limit), the launcher was interrupted (SIGINT/SIGTERM: the
//    user stopped it), or the first failing rank exited with code 2
//    (kNoRestartExitCode: a usage or configuration error, which a restart
//    would repeat; zt train exits 2 for bad flags and configs, as argparse).
//  - Before each restart one line goes to `err_fd`:
//      "<who>: restart 2 of 5 after 41.3 s: rank 1 (pid 4242) was killed by SIGKILL; ..."
//    and when the restarts run out, which failure ended the job.
//  - The result is the last attempt's, with `restarts` = attempts - 1; its
//    exit code is the last failure's.
//  - Several nodes: refused (InvalidArgument) — each node's launcher would
//    restart on its own and their attempts could pair up wrongly; restarts
//    across nodes are LaunchNodeRounds (launch/node_rounds.h), whose
//    launchers agree on each attempt first.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "launch/launcher.h"

namespace zt::comm {

inline constexpr int kNoRestartExitCode = 2;

struct RestartOptions {
  int max_restarts = 0;           // 0: one attempt, as Launch
  std::string who = "zt launch";  // the log lines' prefix
  int err_fd = STDERR_FILENO;
};

struct RestartedLaunch {
  LaunchResult last;  // the final attempt's result
  int restarts = 0;   // attempts after the first
};

// Whether a failed attempt is one a restart could fix (see the contract);
// `why` says why not when it returns false.
bool WorthRestarting(const LaunchResult& result, std::string* why);

absl::StatusOr<RestartedLaunch> LaunchWithRestarts(const LaunchOptions& options, const RestartOptions& restart);

}  // namespace zt::comm
