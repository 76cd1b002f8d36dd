// Implementation of launch/restarts.h.
#include "launch/restarts.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace zt::comm {
namespace {

void Line(int fd, const std::string& text) {
  const std::string line = text + "\n";
  // One write per line, so it is not interleaved with the ranks' output.
  ssize_t unused = ::write(fd, line.data(), line.size());
  (void)unused;
}

}  // namespace

bool WorthRestarting(const LaunchResult& result, std::string* why) {
  if (result.exit_code == 0) {
    *why = "it succeeded";
    return false;
  }
  if (result.interrupted_by != 0) {
    *why = absl::StrCat("the launcher was stopped by ", SignalName(result.interrupted_by));
    return false;
  }
  if (result.timed_out) {
    *why = "the job ran past its --timeout";
    return false;
  }
  if (result.failed_local_rank >= 0 && result.exit_code == kNoRestartExitCode) {
    *why = absl::StrCat("a rank exited with code ", kNoRestartExitCode,
                        " (a usage or configuration error, which a restart would repeat)");
    return false;
  }
  return true;
}

absl::StatusOr<RestartedLaunch> LaunchWithRestarts(const LaunchOptions& options, const RestartOptions& restart) {
  if (restart.max_restarts < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--max-restarts must be >= 0, got ", restart.max_restarts));
  }
  if (restart.max_restarts > 0 && options.nnodes > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-restarts with --nnodes ", options.nnodes,
        ": each node's launcher would restart on its own, and their attempts could pair up wrongly; restarts "
        "across nodes go through LaunchNodeRounds (launch/node_rounds.h), whose launchers agree on each attempt"));
  }
  RestartedLaunch out;
  for (int attempt = 0;; ++attempt) {
    LaunchOptions o = options;
    o.extra_env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(attempt);
    o.extra_env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(restart.max_restarts);
    absl::StatusOr<LaunchResult> r = Launch(o);
    if (!r.ok() && attempt > 0) {
      return absl::Status(r.status().code(),
                          absl::StrCat("restart ", attempt, " could not start: ", r.status().message(),
                                       " (it followed: ", out.last.failure, ")"));
    }
    if (!r.ok()) return r.status();
    out.last = *std::move(r);
    out.restarts = attempt;
    std::string why;
    if (!WorthRestarting(out.last, &why)) {
      if (restart.max_restarts > 0 && out.last.exit_code != 0) {
        Line(restart.err_fd,
             absl::StrCat(restart.who, ": not restarting",
                          attempt == 0 ? std::string()
                                       : absl::StrCat(" after ", attempt, attempt == 1 ? " restart" : " restarts"),
                          ": ", why));
      }
      return out;
    }
    if (attempt == restart.max_restarts) {
      if (restart.max_restarts > 0) {
        Line(restart.err_fd,
             absl::StrCat(restart.who, ": all ", restart.max_restarts,
                          " restarts used (--max-restarts); the last attempt failed: ", out.last.failure));
      }
      return out;
    }
    Line(restart.err_fd, absl::StrFormat("%s: restart %d of %d after %.1f s: %s", restart.who, attempt + 1,
                                         restart.max_restarts, out.last.seconds, out.last.failure));
  }
}

}  // namespace zt::comm
