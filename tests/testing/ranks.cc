// Implementation of tests/testing/ranks.h on top of the rank launcher
// (launch/launcher.h) in capture mode: each rank runs this test binary with
// --zt-rank-worker=NAME, forked from the fork server (rank_zygote.h) or
// exec'd, so no rank inherits a LibTorch/OpenMP state that ran anything.
#include "tests/testing/ranks.h"

#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "launch/launcher.h"
#include "tests/testing/rank_zygote.h"
#include "util/log.h"

namespace zt::testing {
namespace {

constexpr char kWorkerFlag[] = "--zt-rank-worker=";
constexpr char kArgFlag[] = "--zt-rank-arg=";
constexpr char kRankOmpThreads[] = "1";  // each rank's OMP_NUM_THREADS unless extra_env sets it
constexpr size_t kTailLines = 40;
constexpr size_t kTailBytes = 6000;

std::map<std::string, RankWorkerFn>& Registry() {
  static auto* registry = new std::map<std::string, RankWorkerFn>();
  return *registry;
}

// The last kTailLines lines (at most kTailBytes) of `text`, each indented.
std::string Tail(const std::string& text) {
  if (text.empty()) return "    (no output)\n";
  size_t start = text.size() > kTailBytes ? text.size() - kTailBytes : 0;
  size_t lines = 0;
  for (size_t i = text.size(); i > start; --i) {
    if (text[i - 1] == '\n' && i != text.size() && ++lines == kTailLines) {
      start = i;
      break;
    }
  }
  std::string out = start > 0 ? "    ...\n" : "";
  size_t pos = start;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    absl::StrAppend(&out, "    | ", absl::string_view(text).substr(pos, end - pos), "\n");
    pos = end + 1;
  }
  return out;
}

int EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  long parsed = std::strtol(value, &end, 10);
  return (*end == '\0' && parsed >= 0 && parsed <= INT_MAX) ? static_cast<int>(parsed) : fallback;
}

int RunWorker(const std::string& name, const std::string& arg) {
  RankContext ctx;
  ctx.rank = EnvInt("RANK", -1);
  ctx.world_size = EnvInt("WORLD_SIZE", -1);
  ctx.arg = arg;
  if (ctx.rank < 0 || ctx.world_size < 1) {
    std::fprintf(stderr, "rank worker '%s': RANK/WORLD_SIZE missing or invalid; workers are started by RunRanks\n",
                 name.c_str());
    return 2;
  }
  auto it = Registry().find(name);
  if (it == Registry().end()) {
    std::vector<std::string> names;
    for (const auto& entry : Registry()) names.push_back(entry.first);
    std::fprintf(stderr, "rank %d: no rank worker named '%s' in this binary (registered: %s)\n", ctx.rank, name.c_str(),
                 absl::StrJoin(names, ", ").c_str());
    return 2;
  }
  SetLogRank(ctx.rank);
  absl::Status status;
  try {
    status = it->second(ctx);
  } catch (const std::exception& e) {
    status = absl::InternalError(absl::StrCat("uncaught exception: ", e.what()));
  }
  std::fflush(stdout);
  if (!status.ok()) {
    std::fprintf(stderr, "rank %d of %d: worker '%s' failed: %s\n", ctx.rank, ctx.world_size, name.c_str(),
                 status.ToString().c_str());
    return 1;
  }
  return 0;
}

// The worker named by --zt-rank-worker= in argv (with --zt-rank-arg=), or -1
// when argv names none.
int RunWorkerFromArgs(const std::vector<std::string>& argv) {
  std::string worker, arg;
  bool is_worker = false;
  for (size_t i = 1; i < argv.size(); ++i) {
    absl::string_view a(argv[i]);
    if (absl::StartsWith(a, kWorkerFlag)) {
      worker = std::string(a.substr(sizeof(kWorkerFlag) - 1));
      is_worker = true;
    } else if (absl::StartsWith(a, kArgFlag)) {
      arg = std::string(a.substr(sizeof(kArgFlag) - 1));
    }
  }
  return is_worker ? RunWorker(worker, arg) : -1;
}

// The fork server of this test binary, started at the first RunRanks that
// can use it. Null when it could not start (every rank is then exec'd).
RankZygote* Zygote(const std::string& self) {
  // The server loads libgomp with the ranks' default OMP_NUM_THREADS, so
  // ranks that keep the default can be forked.
  static const std::unique_ptr<RankZygote> zygote = [&]() -> std::unique_ptr<RankZygote> {
    auto started = RankZygote::Start(self, {{"OMP_NUM_THREADS", kRankOmpThreads}});
    return started.ok() ? std::move(*started) : nullptr;
  }();
  return zygote.get();
}

bool ForkServerWanted(const RankRunOptions& options) {
  const char* env = std::getenv("ZT_RANK_FORK_SERVER");
  return options.fork_server && (env == nullptr || std::string(env) != "0");
}

}  // namespace

bool RegisterRankWorker(const std::string& name, RankWorkerFn fn) {
  bool inserted = Registry().emplace(name, std::move(fn)).second;
  if (!inserted) {
    std::fprintf(stderr, "zerotorch internal error: rank worker '%s' registered twice\n", name.c_str());
    std::abort();
  }
  return true;
}

std::string RankRunResult::Summary() const {
  std::string out = absl::StrFormat("worker '%s', world size %d, %.2f s: %s\n", worker, exit_codes.size(), seconds,
                                    ok_ ? "ok" : "FAILED");
  if (!failure.empty()) absl::StrAppend(&out, "  ", failure, "\n");
  std::set<int> may_fail(may_fail_ranks.begin(), may_fail_ranks.end());
  for (size_t r = 0; r < exit_codes.size(); ++r) {
    bool timeout = r < timed_out.size() && timed_out[r];
    std::string state = timeout ? "timed out (killed)" : absl::StrCat("exit code ", exit_codes[r]);
    if (exit_codes[r] > 128 && !timeout) absl::StrAppend(&state, " (signal ", exit_codes[r] - 128, ")");
    if (may_fail.count(static_cast<int>(r))) absl::StrAppend(&state, " [may fail]");
    absl::StrAppend(&out, "  rank ", r, ": ", state, "\n");
    bool failing = (exit_codes[r] != 0 || timeout) && !may_fail.count(static_cast<int>(r));
    if (failing && r < outputs.size()) absl::StrAppend(&out, "  rank ", r, " output (tail):\n", Tail(outputs[r]));
  }
  return out;
}

RankRunResult RunRanks(const std::string& worker, const RankRunOptions& options) {
  RankRunResult result;
  result.worker = worker;
  result.may_fail_ranks = options.may_fail_ranks;
  if (!Registry().count(worker)) {
    result.failure = absl::StrCat("no rank worker named '", worker, "' is registered in this binary");
    return result;
  }
  char self[PATH_MAX];
  ssize_t len = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) {
    result.failure = "cannot read /proc/self/exe to re-execute the test binary";
    return result;
  }
  self[len] = '\0';

  comm::LaunchOptions launch;
  launch.nproc_per_node = options.world_size;
  launch.master_addr = "127.0.0.1";
  launch.master_port = 0;  // a fresh free port per run
  launch.command = {self, absl::StrCat(kWorkerFlag, worker), absl::StrCat(kArgFlag, options.arg)};
  launch.extra_env["OMP_NUM_THREADS"] = kRankOmpThreads;
  for (const auto& [key, value] : options.extra_env) launch.extra_env[key] = value;
  launch.may_fail_ranks.insert(options.may_fail_ranks.begin(), options.may_fail_ranks.end());
  launch.capture_output = true;
  launch.print_notes = false;
  // Ctrl-C / ctest should end the test binary itself; the ranks follow it
  // through PR_SET_PDEATHSIG.
  launch.forward_signals = false;
  launch.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(options.timeout);
  launch.kill_grace = std::chrono::seconds(3);
  if (ForkServerWanted(options)) {
    if (RankZygote* zygote = Zygote(self)) {
      launch.spawn = [zygote](const comm::RankSpawnRequest& request) { return zygote->Spawn(request); };
    }
  }

  absl::StatusOr<comm::LaunchResult> launched = comm::Launch(launch);
  if (!launched.ok()) {
    result.failure = absl::StrCat("could not start the ranks: ", launched.status().message());
    return result;
  }
  result.seconds = launched->seconds;
  result.failure = launched->failure;
  std::set<int> may_fail(options.may_fail_ranks.begin(), options.may_fail_ranks.end());
  bool ok = true;
  for (comm::RankResult& rank : launched->ranks) {
    result.exit_codes.push_back(rank.exit_code);
    result.timed_out.push_back(rank.timed_out);
    result.outputs.push_back(std::move(rank.output));
    if (!may_fail.count(rank.rank) && (rank.exit_code != 0 || rank.timed_out)) ok = false;
  }
  result.ok_ = ok;
  return result;
}

absl::Status RunEachInTheseRanks(const std::vector<std::string>& names,
                                 const std::function<absl::Status(const std::string&)>& run) {
  std::vector<std::string> failures;
  for (const std::string& name : names) {
    absl::Status status;
    try {
      status = run(name);
    } catch (const std::exception& e) {
      failures.push_back(absl::StrCat(name, " threw (later ones not run): ", e.what()));
      break;
    }
    if (!status.ok()) failures.push_back(absl::StrCat(name, ": ", status.message()));
  }
  if (failures.empty()) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(failures.size(), " of ", names.size(), " failed:\n  ", absl::StrJoin(failures, "\n  ")));
}

int RankTestMain(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (const std::string& a : args) {
    int fd = -1;
    if (absl::StartsWith(a, kZygoteFlag) && absl::SimpleAtoi(a.substr(sizeof(kZygoteFlag) - 1), &fd) && fd >= 0) {
      ServeRankZygote(fd, RunWorkerFromArgs);
    }
  }
  const int worker_code = RunWorkerFromArgs(args);
  if (worker_code >= 0) return worker_code;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

}  // namespace zt::testing
