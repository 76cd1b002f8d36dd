// Starts ranks of this very program by fork alone, without exec: a
// comm::RankSpawner for `zt train --nproc N`.
//
// Why: a process linking Debian's LibTorch spends 1-3 s of CPU before main
// (about 300 libraries mapped, about 140,000 symbols bound, then LibTorch's
// operator registration). A launcher that has paid that once can fork its
// ranks from that state instead of paying it again in each of them.
//
// Contract
//  - ForkSpawner(run_rank) serves a request only when all of these hold, and
//    returns Unimplemented otherwise (the launcher then execs the rank as
//    before; launch/launcher.h):
//      * the request's executable is this process's own (/proc/self/exe) or
//        one of `same_program` (a front program that execs this one with
//        its arguments, so that running it is running this program);
//      * this process runs exactly one thread: forking a process with other
//        threads could leave locks held in the child (and GNU OpenMP's pool,
//        once started, does not survive fork);
//      * the rank's load-time environment (IsLoadTimeVariable: variables
//        libraries read while they load, before main) equals this process's,
//        except OMP_NUM_THREADS when the rank's value is one positive
//        integer, which the rank's code applies at run time instead
//        (comm::InitProcessGroup does);
//      * ZT_FORK_RANKS is not "0" in this process's environment
//        (kForkRanksEnv; with "always", a refusal is an error instead).
//  - The rank is what exec would have given, minus the start-up: its own
//    process group, PR_SET_PDEATHSIG=SIGKILL against the launcher, caught
//    signals back to their defaults and none blocked, close-on-exec
//    descriptors closed, stdin/stdout/stderr from the request, and the
//    request's environment, replaced whole. It then runs run_rank(argv) and
//    exits with what it returns (static destructors run, as after main).
//  - State the launcher built before Launch (parsed flags, caches, random
//    generators) is inherited. The rank's code must not depend on it:
//    run_rank should start from argv and the environment as main would.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "launch/launcher.h"

namespace zt::comm {

// True for a variable some library reads while it loads, before main
// (OMP_*, OPENBLAS_*, LD_*, MALLOC_*, sanitizer options, TORCH_*, ...), so a
// process forked after loading cannot take a new value of it.
bool IsLoadTimeVariable(const std::string& name);

// The load-time variables ("KEY=value" strings in, KEY -> value out) of an
// environment.
std::map<std::string, std::string> LoadTimeEnvironment(const std::vector<std::string>& env);

// In the launcher's environment: "0" execs every rank (ForkSpawner
// declines); "always" makes a rank that cannot be forked an error that says
// why (FailedPrecondition) instead of an exec; anything else: fork where the
// contract allows.
inline constexpr char kForkRanksEnv[] = "ZT_FORK_RANKS";

using RankMain = std::function<int(const std::vector<std::string>& argv)>;

RankSpawner ForkSpawner(RankMain run_rank, std::vector<std::string> same_program = {});

// The rank's side of a fork, for ForkSpawner and other fork servers (the
// test harness's): installs `fds` as stdin, stdout and stderr, closes the
// close-on-exec descriptors above 2, puts caught signals back to their
// defaults and unblocks all, replaces the environment with `env`
// ("KEY=value"), then runs run_rank(argv) and exits with what it returns.
// Process group and death signal are the caller's to set first. Call it only
// in a child forked from a single-threaded process (it allocates).
[[noreturn]] void RunForkedRank(const int fds[3], const std::vector<std::string>& argv,
                                const std::vector<std::string>& env, const RankMain& run_rank);

// True in a rank started by RunForkedRank (after the fork, in the child).
bool RankWasForked();

}  // namespace zt::comm
