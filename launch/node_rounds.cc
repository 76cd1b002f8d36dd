// Implementation of launch/node_rounds.h. The launchers talk through a few
// keys, each written once, under "zt-launch/":
//   job                      node 0: job id, nproc, nnodes range, restarts, command digest
//   open                     node 0: the round it opened last
//   r<r>/claim/<node>        counter: a second launcher with one node rank is refused
//   r<r>/hello/<node>        a launcher's join of round r (its verdict on the last round)
//   r<r>/plan                node 0: go (the members) or stop (exit code, why)
//   r<r>/nfailed, r<r>/failed  counter, and the first failure of round r
//   r<r>/result/<node>       a member's ranks ended (exit code, failure)
//   r<r>/outcome             node 0: done or failed
//   r<r>/alive/<node>        a member's launcher beats while its ranks run and until the outcome
//   bye/<node>               a launcher read the job's end; node 0 may take the store down
//   end                      node 0: the job is over (exit code)
// Values are "key=value" lines. Every wait polls Find (kv_store.h).
#include "launch/node_rounds.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "launch/rank_env.h"
#include "util/status.h"
#include "util/std_mutex.h"

namespace zt::comm {
namespace {

using Clock = std::chrono::steady_clock;
using FieldMap = std::map<std::string, std::string>;

constexpr auto kPollPeriod = std::chrono::milliseconds(50);
// How long node 0 keeps the store up for members to read the job's end,
// beyond the time their ranks may take to stop (kill_grace).
constexpr auto kByeTimeout = std::chrono::seconds(10);
// A member's launcher beats this often while its ranks run and until the
// round's outcome; node 0 takes one silent for kLauncherSilence as gone
// (killed, frozen, its host down), whatever its ranks were doing.
constexpr auto kBeatPeriod = std::chrono::milliseconds(500);
constexpr auto kLauncherSilence = std::chrono::seconds(5);
// Every store operation's deadline: a node 0 that is frozen or cut off is
// an error after this long, not after --join-timeout.
constexpr std::chrono::milliseconds kStoreOperationTimeout = std::chrono::seconds(30);

std::string OneLine(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

std::string EncodeFields(const FieldMap& fields) {
  std::string out;
  for (const auto& [key, value] : fields) absl::StrAppend(&out, key, "=", OneLine(value), "\n");
  return out;
}

FieldMap DecodeFields(const std::string& text) {
  FieldMap fields;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) continue;
    fields[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
  }
  return fields;
}

int IntField(const FieldMap& f, const std::string& key, int fallback) {
  int value = fallback;
  auto it = f.find(key);
  if (it == f.end() || !absl::SimpleAtoi(it->second, &value)) return fallback;
  return value;
}

std::string Field(const FieldMap& f, const std::string& key) {
  auto it = f.find(key);
  return it == f.end() ? std::string() : it->second;
}

std::string JobKey(const std::string& what) { return absl::StrCat("zt-launch/", what); }
std::string RoundKey(int round, const std::string& what) { return absl::StrCat("zt-launch/r", round, "/", what); }
std::string RoundKey(int round, const std::string& what, int node) {
  return absl::StrCat("zt-launch/r", round, "/", what, "/", node);
}

std::string NodesText(const std::vector<int>& nodes) {
  return absl::StrCat(nodes.size() == 1 ? "node " : "nodes ", absl::StrJoin(nodes, ", "));
}

std::vector<int> ParseNodes(const std::string& csv) {
  std::vector<int> nodes;
  for (absl::string_view part : absl::StrSplit(csv, ',', absl::SkipEmpty())) {
    int n = 0;
    if (absl::SimpleAtoi(part, &n)) nodes.push_back(n);
  }
  return nodes;
}

void WriteLine(int fd, const std::string& text) {
  const std::string line = text + "\n";
  ssize_t unused = ::write(fd, line.data(), line.size());  // one write: not interleaved with rank output
  (void)unused;
}

std::string CommandDigest(const LaunchOptions& o) { return CommandLineJobId(o.command); }

// The job id the user gave this node: extra_env's or the environment's
// ZT_JOB_ID, else TORCHELASTIC_RUN_ID; empty when none.
std::string GivenJobId(const LaunchOptions& o) {
  if (auto it = o.extra_env.find("ZT_JOB_ID"); it != o.extra_env.end() && !it->second.empty()) return it->second;
  const std::map<std::string, std::string> env = CurrentEnvironment();
  for (const char* name : {"ZT_JOB_ID", "TORCHELASTIC_RUN_ID"}) {
    if (auto it = env.find(name); it != env.end() && !it->second.empty()) return it->second;
  }
  return "";
}

// A member launcher's beat (r<r>/alive/<node>): a counter written at most
// every kBeatPeriod, so node 0 can tell a slow member from a gone one.
class LauncherBeat {
 public:
  explicit LauncherBeat(std::string key) : key_(std::move(key)) {}
  // Writes the next beat when one is due.
  absl::Status MaybeBeat(KeyValueStore& store) {
    if (key_.empty() || Clock::now() < next_) return absl::OkStatus();
    next_ = Clock::now() + kBeatPeriod;
    return store.Set(key_, std::to_string(++count_));
  }

 private:
  std::string key_;  // empty: node 0, which does not beat
  int64_t count_ = 0;
  Clock::time_point next_ = Clock::now();
};

// While this node's ranks run (Launch, on the calling thread): watches the
// round's "failed" record, so that stop_check answers at once from what it
// last saw instead of blocking the launcher's loop on the store, and, on a
// member, beats. The store is used only by this thread until it is joined.
class RoundWatcher {
 public:
  using Lost = std::function<std::string(const absl::Status&)>;
  using Describe = std::function<std::string(const FieldMap&)>;
  RoundWatcher(KeyValueStore& store, std::string failed_key, LauncherBeat& beat, Lost lost, Describe describe)
      : store_(store),
        failed_key_(std::move(failed_key)),
        beat_(beat),
        lost_(std::move(lost)),
        describe_(std::move(describe)),
        thread_([this] { Loop(); }) {}
  ~RoundWatcher() {
    {
      StdMutexLock lock(&mu_);
      stopping_ = true;
    }
    cv_.NotifyAll();
    thread_.join();
  }
  std::optional<std::string> reason() const {
    StdMutexLock lock(&mu_);
    return reason_;
  }

 private:
  bool Done() const {
    StdMutexLock lock(&mu_);
    return stopping_ || reason_.has_value();
  }

  // One look at the store (and a beat when one is due), without the lock.
  std::optional<std::string> Poll() {
    if (absl::Status s = beat_.MaybeBeat(store_); !s.ok()) return lost_(s);
    absl::StatusOr<std::optional<std::string>> failed = store_.Find(failed_key_);
    if (!failed.ok()) return lost_(failed.status());
    if (failed->has_value()) return describe_(DecodeFields(**failed));
    return std::nullopt;
  }

  void Loop() {
    while (!Done()) {
      std::optional<std::string> found = Poll();
      StdMutexLock lock(&mu_);
      if (found.has_value()) reason_ = std::move(found);
      const Clock::time_point until = Clock::now() + std::chrono::milliseconds(100);
      while (!stopping_ && cv_.WaitUntil(&mu_, until)) {
      }
    }
  }

  KeyValueStore& store_;
  const std::string failed_key_;
  LauncherBeat& beat_;  // this thread's alone until it is joined
  const Lost lost_;
  const Describe describe_;
  mutable StdMutex mu_;
  StdCondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<std::string> reason_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts once the rest is built
};

// One node's launcher across the rounds of one job.
class NodeAgent {
 public:
  NodeAgent(const LaunchOptions& options, const NodeRoundOptions& rounds, std::unique_ptr<KeyValueStore> store)
      : options_(options), rounds_(rounds), store_(std::move(store)), node_(options.node_rank) {}

  absl::StatusOr<RestartedLaunch> Run() { return node_ == 0 ? RunCoordinator() : RunMember(); }

 private:
  // --- store helpers: errors name node 0's launcher, whose store it is ---
  absl::Status Lost(const absl::Status& s) const {
    if (node_ == 0) return s;
    return absl::UnavailableError(absl::StrCat(
        "node ", node_, " lost the job's rendezvous store at ", store_->address(), " (hosted by node 0's ", rounds_.who,
        "): ", s.message(),
        ". Node 0 hosts the rendezvous for the whole job and must stay up; restart the job on every node"));
  }
  absl::StatusOr<std::optional<FieldMap>> FindFields(const std::string& key) {
    absl::StatusOr<std::optional<std::string>> got = store_->Find(key);
    if (!got.ok()) return Lost(got.status());
    if (!got->has_value()) return std::optional<FieldMap>();
    return std::optional<FieldMap>(DecodeFields(**got));
  }
  absl::Status SetFields(const std::string& key, const FieldMap& fields) {
    absl::Status s = store_->Set(key, EncodeFields(fields));
    return s.ok() ? s : Lost(s);
  }
  // Polls until `key` exists (nullopt after `timeout`).
  absl::StatusOr<std::optional<FieldMap>> AwaitFields(const std::string& key, std::chrono::milliseconds timeout) {
    const Clock::time_point deadline = Clock::now() + timeout;
    while (true) {
      ZT_ASSIGN_OR_RETURN(std::optional<FieldMap> got, FindFields(key));
      if (got.has_value() || Clock::now() >= deadline) return got;
      std::this_thread::sleep_for(kPollPeriod);
    }
  }

  // --- steps every node takes ---
  absl::Status ClaimNodeRank(int round) {
    absl::StatusOr<int64_t> n = store_->Add(RoundKey(round, "claim", node_), 1);
    if (!n.ok()) return Lost(n.status());
    if (*n != 1) {
      return absl::AlreadyExistsError(absl::StrCat("--node-rank ", node_, " is already taken in this job at ",
                                                   store_->address(),
                                                   " by another launcher: give every node its own --node-rank"));
    }
    return absl::OkStatus();
  }

  // `leaving`: this launcher exits without reading the round's plan.
  absl::Status Hello(int round, bool leaving = false) {
    ZT_RETURN_IF_ERROR(ClaimNodeRank(round));
    FieldMap hello = {{"nproc", std::to_string(options_.nproc_per_node)}, {"leaving", leaving ? "1" : "0"},
                      {"verdict", verdict_stop_ ? "stop" : "restart"},    {"why", verdict_why_},
                      {"code", std::to_string(last_.exit_code)},          {"pid", std::to_string(::getpid())}};
    return SetFields(RoundKey(round, "hello", node_), hello);
  }

  // Publishes this node's failure of `round` unless another came first.
  absl::Status MarkFailed(int round, int code, const std::string& failure) {
    absl::StatusOr<int64_t> n = store_->Add(RoundKey(round, "nfailed"), 1);
    if (!n.ok()) return Lost(n.status());
    if (*n != 1) return absl::OkStatus();
    return SetFields(RoundKey(round, "failed"),
                     {{"code", std::to_string(code)}, {"node", std::to_string(node_)}, {"failure", failure}});
  }

  // The text a round's "failed" record gives the other nodes' ranks as the
  // reason they were stopped: "node 1 failed (rank 3 ... exited with code 2)".
  static std::string StopReason(const FieldMap& failed) {
    const std::string text = Field(failed, "failure");
    const std::string prefix = absl::StrCat("node ", Field(failed, "node"), ": ");
    if (text.rfind(prefix, 0) == 0) {
      return absl::StrCat("node ", Field(failed, "node"), " failed (", text.substr(prefix.size()), ")");
    }
    return text;
  }

  // Runs this node's ranks as its group rank among `members`, beating with `beat`.
  absl::StatusOr<LaunchResult> RunAttempt(int round, const std::vector<int>& members, LauncherBeat* beat) {
    LaunchOptions o = options_;
    o.nnodes = static_cast<int>(members.size());
    o.node_rank = static_cast<int>(std::find(members.begin(), members.end(), node_) - members.begin());
    o.extra_env["TORCHELASTIC_USE_AGENT_STORE"] = "True";
    o.extra_env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(round);
    o.extra_env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(rounds_.max_restarts);
    o.extra_env["ZT_JOB_ID"] = job_id_;
    RoundWatcher watcher(
        *store_, RoundKey(round, "failed"), *beat,
        [this](const absl::Status& s) { return std::string(Lost(s).message()); }, &NodeAgent::StopReason);
    o.stop_check = [&watcher] { return watcher.reason(); };
    absl::StatusOr<LaunchResult> r = Launch(o);
    if (r.ok()) attempts_seconds_ = r->seconds;
    return r;
  }

  // After this node's ranks of `round` ended: publish the result.
  absl::Status Report(int round, const LaunchResult& r) {
    last_ = r;
    if (r.exit_code != 0) {
      const bool own = r.stopped_for.empty();
      if (own) ZT_RETURN_IF_ERROR(MarkFailed(round, r.exit_code, absl::StrCat("node ", node_, ": ", r.failure)));
      std::string why;
      verdict_stop_ = own && !WorthRestarting(r, &why);
      verdict_why_ = verdict_stop_ ? absl::StrCat("node ", node_, ": ", why) : std::string();
    }
    return SetFields(RoundKey(round, "result", node_), {{"code", std::to_string(r.exit_code)}, {"failure", r.failure}});
  }

  void Say(const std::string& text) const { WriteLine(rounds_.err_fd, absl::StrCat(rounds_.who, ": ", text)); }
  // The line every node prints for restart `round`: why, and how the membership changed.
  void SayRestart(int round, const std::string& failure, const std::string& note) const {
    Say(absl::StrFormat("restart %d of %d after %.1f s: %s%s", round, rounds_.max_restarts, attempts_seconds_, failure,
                        note.empty() ? "" : absl::StrCat("; now ", note)));
  }

  // --- node 0 ---
  absl::StatusOr<RestartedLaunch> RunCoordinator();
  // Waits for the launchers joining `round`; the members, or why the job stops.
  struct Gathered {
    std::vector<int> members;
    std::vector<int> heard;    // every node that joined the round and waits for its plan
    std::vector<int> leaving;  // nodes that joined only to say they stop, and exited
    bool stop = false;
    int code = 1;
    std::string why;
  };
  absl::StatusOr<Gathered> Gather(int round);
  absl::StatusOr<bool> DecideOutcome(int round, const std::vector<int>& members, std::string* why);
  absl::StatusOr<RestartedLaunch> EndJob(int round, int code, const std::vector<int>& members, RestartedLaunch out);

  // --- other nodes ---
  absl::StatusOr<RestartedLaunch> RunMember();
  absl::Status CheckJob(const FieldMap& job) const;

  const LaunchOptions& options_;
  const NodeRoundOptions& rounds_;
  std::unique_ptr<KeyValueStore> store_;
  const int node_;
  std::string job_id_;
  LaunchResult last_;
  bool verdict_stop_ = false;  // this node's last failure is not worth a restart
  std::string verdict_why_;
  double attempts_seconds_ = 0;
};

absl::StatusOr<NodeAgent::Gathered> NodeAgent::Gather(int round) {
  const Clock::time_point start = Clock::now();
  std::optional<Clock::time_point> min_reached;
  while (true) {
    Gathered g;
    g.members.push_back(0);
    for (int n = 1; n < rounds_.max_nodes; ++n) {
      ZT_ASSIGN_OR_RETURN(std::optional<FieldMap> hello, FindFields(RoundKey(round, "hello", n)));
      if (!hello.has_value()) continue;
      (Field(*hello, "leaving") == "1" ? g.leaving : g.heard).push_back(n);
      if (g.stop) continue;
      if (Field(*hello, "verdict") == "stop") {
        g.stop = true;
        g.code = IntField(*hello, "code", 1);
        g.why = Field(*hello, "why");
      } else if (IntField(*hello, "nproc", -1) != options_.nproc_per_node) {
        g.stop = true;
        g.code = kNoRestartExitCode;
        g.why = absl::StrCat("node ", n, " runs --nproc-per-node ", Field(*hello, "nproc"), " but node 0 runs ",
                             options_.nproc_per_node, ": give every node the same");
      }
      g.members.push_back(n);
    }
    if (g.stop) return g;
    const Clock::time_point now = Clock::now();
    const int joined = static_cast<int>(g.members.size());
    if (joined == rounds_.max_nodes) return g;
    if (joined >= rounds_.min_nodes) {
      if (!min_reached) min_reached = now;
      if (now - *min_reached >= rounds_.last_call) return g;
    } else if (now - start >= rounds_.join_timeout) {
      std::vector<int> missing;
      for (int n = 0; n < rounds_.max_nodes; ++n) {
        if (std::find(g.members.begin(), g.members.end(), n) == g.members.end()) missing.push_back(n);
      }
      g.stop = true;
      g.code = 1;
      g.why = absl::StrCat("only ", NodesText(g.members), " joined ",
                           round == 0 ? "the job" : absl::StrCat("restart ", round), " within ",
                           absl::StrFormat("%g s", rounds_.join_timeout.count() / 1000.0), " (--join-timeout); ",
                           rounds_.min_nodes, " of --nnodes ", rounds_.min_nodes, ":", rounds_.max_nodes,
                           " are needed (missing: ", absl::StrJoin(missing, ", "),
                           "). Start zt launch on the missing nodes, or lower the minimum of --nnodes");
      return g;
    }
    std::this_thread::sleep_for(kPollPeriod);
  }
}

// After node 0's ranks of `round` ended: true when every member's ended with
// 0, false (with `why`) at the first failure: a "failed" record, a non-zero
// result (a node whose ranks were stopped for a store error writes one
// without "failed"), or a member whose launcher stopped beating before its
// result came (its host is gone) -- not a member whose ranks merely run
// longer than node 0's.
absl::StatusOr<bool> NodeAgent::DecideOutcome(int round, const std::vector<int>& members, std::string* why) {
  struct Beat {
    std::string value;
    Clock::time_point changed;
  };
  std::map<int, Beat> beats;
  for (int n : members) beats[n] = {"", Clock::now()};
  while (true) {
    ZT_ASSIGN_OR_RETURN(std::optional<FieldMap> failed, FindFields(RoundKey(round, "failed")));
    if (failed.has_value()) {
      *why = Field(*failed, "failure");
      return false;
    }
    std::vector<int> missing, silent;
    for (int n : members) {
      ZT_ASSIGN_OR_RETURN(std::optional<FieldMap> result, FindFields(RoundKey(round, "result", n)));
      if (result.has_value()) {
        if (IntField(*result, "code", 1) != 0) {
          *why = absl::StrCat("node ", n, ": ", Field(*result, "failure"));
          return false;
        }
        continue;
      }
      missing.push_back(n);
      if (n == 0) continue;
      ZT_ASSIGN_OR_RETURN(std::optional<std::string> beat, store_->Find(RoundKey(round, "alive", n)));
      Beat& b = beats[n];
      const std::string now_value = beat.value_or("");
      if (now_value != b.value) b = {now_value, Clock::now()};
      if (Clock::now() - b.changed >= kLauncherSilence) silent.push_back(n);
    }
    if (missing.empty()) {
      // Every result is in and each is 0; a failure publishes "failed" before its result.
      ZT_ASSIGN_OR_RETURN(failed, FindFields(RoundKey(round, "failed")));
      if (!failed.has_value()) return true;
      continue;
    }
    if (!silent.empty()) {
      *why = absl::StrCat(NodesText(silent), "'s launcher stopped answering for ",
                          absl::StrFormat("%g s", std::chrono::duration<double>(kLauncherSilence).count()),
                          " before reporting its ranks' end: ", silent.size() == 1 ? "its" : "their",
                          " launcher or host is gone");
      ZT_RETURN_IF_ERROR(MarkFailed(round, 1, *why));
      return false;
    }
    std::this_thread::sleep_for(kPollPeriod);
  }
}

absl::StatusOr<RestartedLaunch> NodeAgent::EndJob(int round, int code, const std::vector<int>& members,
                                                  RestartedLaunch out) {
  ZT_RETURN_IF_ERROR(SetFields(JobKey("end"), {{"code", std::to_string(code)}, {"round", std::to_string(round)}}));
  // Keep the store up until every launcher that waits on it has read the
  // end: the members, and nodes waiting to be taken in at the next round
  // (re-read on every pass: one may come meanwhile). Bounded: a launcher that
  // is gone does not hold node 0; the members may still be stopping ranks.
  const Clock::time_point deadline = Clock::now() + kByeTimeout + options_.kill_grace;
  while (Clock::now() < deadline) {
    std::vector<int> readers;
    for (int n : members) {
      if (n != 0) readers.push_back(n);
    }
    for (int n = 1; n < rounds_.max_nodes; ++n) {
      ZT_ASSIGN_OR_RETURN(std::optional<FieldMap> hello, FindFields(RoundKey(round + 1, "hello", n)));
      if (hello.has_value() && Field(*hello, "leaving") != "1") readers.push_back(n);
    }
    bool all_read = true;
    for (int n : readers) {
      ZT_ASSIGN_OR_RETURN(std::optional<FieldMap> bye, FindFields(JobKey(absl::StrCat("bye/", n))));
      all_read = all_read && bye.has_value();
    }
    if (all_read) break;
    std::this_thread::sleep_for(kPollPeriod);
  }
  return out;
}

absl::StatusOr<RestartedLaunch> NodeAgent::RunCoordinator() {
  job_id_ = GivenJobId(options_);
  const bool given_job = !job_id_.empty();
  if (!given_job) job_id_ = NewJobId();
  ZT_RETURN_IF_ERROR(SetFields(JobKey("job"), {{"job", job_id_},
                                               {"nproc", std::to_string(options_.nproc_per_node)},
                                               {"min", std::to_string(rounds_.min_nodes)},
                                               {"max", std::to_string(rounds_.max_nodes)},
                                               {"restarts", std::to_string(rounds_.max_restarts)},
                                               {"memory_copies", rounds_.memory_copies ? "on" : "off"},
                                               {"command", CommandDigest(options_)},
                                               {"given_job", given_job ? "1" : "0"}}));
  // A rank started without this agreement (its node's zt launch given
  // neither --max-restarts nor MIN:MAX) that reaches this store finds this
  // instead of a rank 0's job, and its rendezvous error says what to fix.
  ZT_RETURN_IF_ERROR(
      Lost(store_->Set("zt/rdzv/job",
                       "zt-launch-store (node 0's zt launch agrees on restarts across nodes here: start every node's "
                       "zt launch with the same --nnodes and --max-restarts)")));
  RestartedLaunch out;
  std::vector<int> previous;
  std::string last_failure;
  for (int round = 0;; ++round) {
    ZT_RETURN_IF_ERROR(SetFields(JobKey("open"), {{"round", std::to_string(round)}}));
    ZT_RETURN_IF_ERROR(Hello(round));
    Gathered g;
    if (verdict_stop_) {
      g.stop = true;
      g.code = last_.exit_code;
      g.why = verdict_why_;
      g.members = previous;
    } else if (round > rounds_.max_restarts) {
      g.stop = true;
      g.code = std::max(1, out.last.exit_code);  // the round's failure's code (set below from its record)
      g.why = absl::StrCat("all ", rounds_.max_restarts,
                           " restarts used (--max-restarts); the last round failed: ", last_failure);
      g.members = previous;
    } else {
      ZT_ASSIGN_OR_RETURN(g, Gather(round));
    }
    if (g.stop) {
      ZT_RETURN_IF_ERROR(
          SetFields(RoundKey(round, "plan"), {{"action", "stop"}, {"code", std::to_string(g.code)}, {"why", g.why}}));
      const std::string said = absl::StrCat(round > 0 ? "not restarting: " : "not starting: ", g.why);
      out.restarts = std::max(0, round - 1);
      // This node's ranks did not fail on their own: the job's failure is its exit code.
      if (out.last.exit_code == 0 || !out.last.stopped_for.empty()) {
        out.last.exit_code = g.code != 0 ? g.code : 1;
        out.last.failure = said;
      } else {
        Say(said);
      }
      std::vector<int> readers;  // who waits for this plan
      for (const std::vector<int>* nodes : {&previous, &g.heard}) {
        for (int n : *nodes) {
          if (std::find(g.leaving.begin(), g.leaving.end(), n) == g.leaving.end()) readers.push_back(n);
        }
      }
      return EndJob(round, g.code, readers, std::move(out));
    }
    std::string note;
    if (round > 0 && g.members != previous) {
      note = absl::StrCat(
          NodesText(g.members), " (world size ", static_cast<int>(g.members.size()) * options_.nproc_per_node, ", was ",
          static_cast<int>(previous.size()) * options_.nproc_per_node, " on ", NodesText(previous), ")");
    } else if (round == 0 && static_cast<int>(g.members.size()) < rounds_.max_nodes) {
      note =
          absl::StrCat("starting on ", NodesText(g.members), " of --nnodes ", rounds_.min_nodes, ":", rounds_.max_nodes,
                       " (world size ", static_cast<int>(g.members.size()) * options_.nproc_per_node,
                       "); nodes that come later join at the next restart");
    }
    ZT_RETURN_IF_ERROR(SetFields(RoundKey(round, "plan"),
                                 {{"action", "go"}, {"nodes", absl::StrJoin(g.members, ",")}, {"note", note}}));
    if (round > 0) {
      SayRestart(round, last_failure, note);
    } else if (!note.empty()) {
      Say(note);
    }
    previous = g.members;
    LauncherBeat no_beat("");  // node 0's liveness is its store's
    absl::StatusOr<LaunchResult> r = RunAttempt(round, g.members, &no_beat);
    if (!r.ok()) {
      // Nothing started on this node, and a restart would fail the same way:
      // the others stop their ranks, read why and end (EndJob keeps the store
      // up until they have).
      const std::string why = absl::StrCat("node 0 could not start its ranks: ", r.status().message());
      (void)MarkFailed(round, 1, why);
      (void)SetFields(RoundKey(round, "outcome"), {{"action", "failed"}, {"why", why}});
      (void)SetFields(RoundKey(round + 1, "plan"), {{"action", "stop"}, {"code", "1"}, {"why", why}});
      (void)EndJob(round + 1, 1, g.members, out);
      return r.status();
    }
    ZT_RETURN_IF_ERROR(Report(round, *r));
    out.last = *r;
    out.restarts = round;
    std::string why;
    ZT_ASSIGN_OR_RETURN(bool done, DecideOutcome(round, g.members, &why));
    ZT_RETURN_IF_ERROR(
        SetFields(RoundKey(round, "outcome"), {{"action", done ? "done" : "failed"}, {"why", done ? "" : why}}));
    if (done) return EndJob(round, 0, g.members, std::move(out));
    last_failure = why;
    if (out.last.exit_code == 0 || !out.last.stopped_for.empty()) {
      // This node's ranks finished or were stopped; the round failed elsewhere.
      ZT_ASSIGN_OR_RETURN(std::optional<FieldMap> failed, FindFields(RoundKey(round, "failed")));
      out.last.exit_code = failed.has_value() ? std::max(1, IntField(*failed, "code", 1)) : 1;
      out.last.failure = why;
    }
  }
}

absl::Status NodeAgent::CheckJob(const FieldMap& job) const {
  const std::pair<std::string, std::string> ours[] = {
      {"--nproc-per-node", std::to_string(options_.nproc_per_node)},
      {"--nnodes", absl::StrCat(rounds_.min_nodes, ":", rounds_.max_nodes)},
      {"--max-restarts", std::to_string(rounds_.max_restarts)},
      {"--memory-copies", rounds_.memory_copies ? "on" : "off"},
  };
  const std::string theirs[] = {Field(job, "nproc"), absl::StrCat(Field(job, "min"), ":", Field(job, "max")),
                                Field(job, "restarts"), Field(job, "memory_copies")};
  for (size_t i = 0; i < 4; ++i) {
    if (theirs[i] == ours[i].second) continue;
    return absl::InvalidArgumentError(absl::StrCat("node ", node_, " runs ", ours[i].first, " ", ours[i].second,
                                                   " but node 0 runs ", theirs[i], ": give every node the same"));
  }
  const std::string given = GivenJobId(options_);
  if (!given.empty() || Field(job, "given_job") == "1") {
    if (given != Field(job, "job")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "node ", node_, " has job id ", given.empty() ? std::string("(none)") : given, " but the launcher at ",
          store_->address(), " runs job ", Field(job, "job"),
          ": two jobs use the same --master-addr:--master-port, or the nodes were given different ZT_JOB_IDs"));
    }
  } else if (Field(job, "command") != CommandDigest(options_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node ", node_, "'s command differs from node 0's (the launcher at ", store_->address(),
        "): two jobs use the same --master-addr:--master-port, or the nodes run different commands; give each job "
        "its own --master-port, or set the same ZT_JOB_ID on every node when the commands differ on purpose"));
  }
  return absl::OkStatus();
}

absl::StatusOr<RestartedLaunch> NodeAgent::RunMember() {
  ZT_ASSIGN_OR_RETURN(std::optional<FieldMap> job, AwaitFields(JobKey("job"), rounds_.join_timeout));
  if (!job.has_value()) {
    return absl::DeadlineExceededError(absl::StrCat(
        "the store at ", store_->address(), " holds no job of node 0's launcher after ",
        absl::StrFormat("%g s", rounds_.join_timeout.count() / 1000.0),
        " (--join-timeout): node 0 may run zt launch without --max-restarts or --nnodes MIN:MAX (then its rank 0 "
        "hosts the store); give every node the same --nnodes and --max-restarts"));
  }
  job_id_ = Field(*job, "job");
  ZT_ASSIGN_OR_RETURN(std::optional<FieldMap> open, AwaitFields(JobKey("open"), rounds_.join_timeout));
  int round = open.has_value() ? IntField(*open, "round", 0) : 0;
  if (absl::Status mismatch = CheckJob(*job); !mismatch.ok()) {
    // Said to node 0 too, which stops the job naming it instead of waiting for this node.
    verdict_stop_ = true;
    verdict_why_ = std::string(mismatch.message());
    last_.exit_code = kNoRestartExitCode;
    (void)Hello(round, /*leaving=*/true);
    return mismatch;
  }
  {
    ZT_ASSIGN_OR_RETURN(std::optional<FieldMap> plan, FindFields(RoundKey(round, "plan")));
    if (plan.has_value() && Field(*plan, "action") == "stop") {
      // The job is ending: nothing to join.
      RestartedLaunch ended;
      ended.last.exit_code = std::max(1, IntField(*plan, "code", 1));
      ended.last.failure = absl::StrCat("the job is ending without this node: ", Field(*plan, "why"));
      (void)SetFields(JobKey(absl::StrCat("bye/", node_)), {{"read", "stop"}});
      return ended;
    }
    if (plan.has_value()) {
      ++round;
      Say(absl::StrCat("node ", node_, ": the job is running without this node; it joins at the next restart"));
    }
  }
  RestartedLaunch out;
  std::vector<int> previous;
  for (;; ++round) {
    ZT_RETURN_IF_ERROR(Hello(round));
    // The plan, or the job's end (a job that finishes before a late node is taken in).
    std::optional<FieldMap> plan;
    while (true) {
      ZT_ASSIGN_OR_RETURN(plan, FindFields(RoundKey(round, "plan")));
      if (plan.has_value()) break;
      ZT_ASSIGN_OR_RETURN(std::optional<FieldMap> end, FindFields(JobKey("end")));
      if (end.has_value()) {
        (void)SetFields(JobKey(absl::StrCat("bye/", node_)), {{"read", "end"}});
        out.last.exit_code = IntField(*end, "code", 1);
        const std::string text = absl::StrCat("node ", node_, ": the job ended (exit code ", out.last.exit_code,
                                              ") before this node was taken in");
        if (out.last.exit_code == 0) {
          Say(text);
        } else {
          out.last.failure = text;
        }
        return out;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (Field(*plan, "action") == "stop") {
      (void)SetFields(JobKey(absl::StrCat("bye/", node_)), {{"read", "stop"}});
      const std::string said = absl::StrCat(round > 0 ? "not restarting: " : "not starting: ", Field(*plan, "why"));
      out.restarts = std::max(0, round - 1);
      if (out.last.exit_code == 0 || !out.last.stopped_for.empty()) {
        out.last.exit_code = std::max(1, IntField(*plan, "code", 1));
        out.last.failure = said;
      } else {
        Say(said);
      }
      return out;
    }
    const std::vector<int> members = ParseNodes(Field(*plan, "nodes"));
    if (std::find(members.begin(), members.end(), node_) == members.end()) {
      Say(absl::StrCat("node ", node_, ": not taken in at round ", round,
                       " (it came after the round began); it joins at the next restart"));
      continue;
    }
    if (round > 0 && !previous.empty()) {
      ZT_ASSIGN_OR_RETURN(std::optional<FieldMap> failed, FindFields(RoundKey(round - 1, "failed")));
      SayRestart(round, failed.has_value() ? Field(*failed, "failure") : std::string("the last round failed"),
                 Field(*plan, "note"));
    }
    previous = members;
    LauncherBeat beat(RoundKey(round, "alive", node_));
    absl::StatusOr<LaunchResult> r = RunAttempt(round, members, &beat);
    if (!r.ok()) {
      // Said to node 0 as this node's verdict on the round, so that it stops
      // the job naming the cause instead of waiting for this node to rejoin.
      const std::string why = absl::StrCat("node ", node_, " could not start its ranks: ", r.status().message());
      (void)MarkFailed(round, 1, why);
      verdict_stop_ = true;
      verdict_why_ = why;
      last_.exit_code = 1;
      (void)Hello(round + 1, /*leaving=*/true);
      return r.status();
    }
    ZT_RETURN_IF_ERROR(Report(round, *r));
    out.last = *r;
    out.restarts = round;
    // Beating on (node 0 tells a member that is slow to report from one that is gone).
    std::optional<FieldMap> outcome;
    while (true) {
      ZT_ASSIGN_OR_RETURN(outcome, FindFields(RoundKey(round, "outcome")));
      if (outcome.has_value()) break;
      if (absl::Status s = beat.MaybeBeat(*store_); !s.ok()) return Lost(s);
      std::this_thread::sleep_for(kPollPeriod);
    }
    if (Field(*outcome, "action") == "done") {
      (void)SetFields(JobKey(absl::StrCat("bye/", node_)), {{"read", "done"}});
      return out;
    }
    if (out.last.exit_code == 0 || !out.last.stopped_for.empty()) {
      ZT_ASSIGN_OR_RETURN(std::optional<FieldMap> failed, FindFields(RoundKey(round, "failed")));
      out.last.exit_code = failed.has_value() ? std::max(1, IntField(*failed, "code", 1)) : 1;
      out.last.failure = Field(*outcome, "why");
    }
  }
}

}  // namespace

absl::Status ParseNodeRange(const std::string& text, int* min_nodes, int* max_nodes) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("--nnodes takes N or MIN:MAX (numbers of nodes in [1, 65536], MIN <= MAX), got '", text, "'"));
  };
  if (parts.empty() || parts.size() > 2) return bad();
  int lo = 0, hi = 0;
  if (!absl::SimpleAtoi(parts[0], &lo)) return bad();
  hi = lo;
  if (parts.size() == 2 && !absl::SimpleAtoi(parts[1], &hi)) return bad();
  if (lo < 1 || hi > 65536 || lo > hi) return bad();
  *min_nodes = lo;
  *max_nodes = hi;
  return absl::OkStatus();
}

absl::StatusOr<RestartedLaunch> LaunchNodeRounds(const LaunchOptions& options, const NodeRoundOptions& rounds,
                                                 const KeyValueStoreOpener& open) {
  if (rounds.min_nodes < 1 || rounds.max_nodes < rounds.min_nodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--nnodes ", rounds.min_nodes, ":", rounds.max_nodes, ": need 1 <= MIN <= MAX"));
  }
  if (options.node_rank < 0 || options.node_rank >= rounds.max_nodes) {
    return absl::InvalidArgumentError(absl::StrCat("--node-rank must be in [0, ", rounds.max_nodes - 1,
                                                   "] with --nnodes ", rounds.min_nodes, ":", rounds.max_nodes,
                                                   ", got ", options.node_rank));
  }
  if (options.master_port <= 0) {
    return absl::InvalidArgumentError("several nodes need --master-port, the same on every node");
  }
  if (rounds.max_restarts < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--max-restarts must be >= 0, got ", rounds.max_restarts));
  }
  if (!open) return absl::InternalError("no store for the launchers to agree through");
  LaunchOptions checked = options;
  checked.nnodes = rounds.max_nodes;
  ZT_RETURN_IF_ERROR(ValidateLaunchOptions(checked));
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<KeyValueStore> store,
                      open(options.master_addr, options.master_port, options.node_rank == 0, rounds.join_timeout,
                           kStoreOperationTimeout));
  NodeAgent agent(options, rounds, std::move(store));
  return agent.Run();
}

}  // namespace zt::comm
