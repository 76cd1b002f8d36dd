// Tests of the rank launcher (launch/launcher.h) and `zt launch`, with plain
// `sh -c` commands as ranks: environment, output prefixing, failure
// propagation, stopping and signal forwarding, and that no process survives.
#include "launch/launcher.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "launch/free_port.h"
#include "launch/line_buffer.h"
#include "launch/rank_env.h"
#include "launch/restarts.h"
#include "util/unique_fd.h"

namespace zt::comm {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const char kZt[] = ZT_BINARY_DIR "/bin/zt";

// A unique variable given to the ranks of one test, to find survivors by.
std::string NewToken() {
  std::random_device rd;
  return absl::StrCat("zt_launcher_test_", ::getpid(), "_", rd());
}

// Pids of live (non-zombie) processes whose environment holds `token`.
std::vector<int> ProcessesWithToken(const std::string& token) {
  std::vector<int> found;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return found;
  while (struct dirent* entry = ::readdir(proc)) {
    int pid = std::atoi(entry->d_name);
    if (pid <= 0) continue;
    std::ifstream environ_file(absl::StrCat("/proc/", pid, "/environ"), std::ios::binary);
    std::string env((std::istreambuf_iterator<char>(environ_file)), std::istreambuf_iterator<char>());
    if (env.find(token) == std::string::npos) continue;
    std::ifstream stat_file(absl::StrCat("/proc/", pid, "/stat"));
    std::string stat;
    std::getline(stat_file, stat);
    size_t paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z') continue;
    found.push_back(pid);
  }
  ::closedir(proc);
  return found;
}

// Survivors are checked a few times: a process just killed may still be exiting.
void ExpectNoSurvivors(const std::string& token) {
  std::vector<int> left;
  for (int i = 0; i < 50; ++i) {
    left = ProcessesWithToken(token);
    if (left.empty()) return;
    std::this_thread::sleep_for(milliseconds(100));
  }
  ADD_FAILURE() << left.size() << " process(es) with " << token << " survived the launcher, e.g. pid " << left[0];
  for (int pid : left) ::kill(pid, SIGKILL);
}

// An anonymous in-memory file to stand in for the launcher's stdout/stderr.
class MemFile {
 public:
  MemFile() : fd_(::memfd_create("zt_launcher_test", MFD_CLOEXEC)) {}
  int fd() const { return fd_.get(); }
  std::string Read() const {
    std::string text;
    char buffer[65536];
    off_t offset = 0;
    ssize_t n;
    while ((n = ::pread(fd_.get(), buffer, sizeof(buffer), offset)) > 0) {
      text.append(buffer, static_cast<size_t>(n));
      offset += n;
    }
    return text;
  }

 private:
  UniqueFd fd_;
};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

LaunchOptions ShOptions(int nproc, const std::string& script) {
  LaunchOptions o;
  o.nproc_per_node = nproc;
  o.command = {"sh", "-c", script};
  o.capture_output = true;
  o.print_notes = false;
  o.forward_signals = false;
  o.kill_grace = seconds(2);
  o.extra_env["OMP_NUM_THREADS"] = "1";
  return o;
}

const char kEnvScript[] =
    "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT $GROUP_RANK $NODE_RANK "
    "$GROUP_WORLD_SIZE $OMP_NUM_THREADS\"";

// ----------------------------------------------------------------------------
// A child process (`zt launch ...`) with stdout/stderr in memory files.
class Child {
 public:
  explicit Child(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {}) {
    std::vector<std::string> env_strings = extra_env;
    for (char** e = environ; *e != nullptr; ++e) env_strings.push_back(*e);
    std::vector<char*> args, envp;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    for (const std::string& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out_.fd(), STDOUT_FILENO);
      ::dup2(err_.fd(), STDERR_FILENO);
      ::execve(args[0], args.data(), envp.data());
      ::_exit(120);
    }
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  std::string out() const { return out_.Read(); }
  std::string err() const { return err_.Read(); }

  // The exit code (128 + signal for a signal); -1 when still running after `limit`.
  int Wait(seconds limit = seconds(60)) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      int status = 0;
      pid_t done = ::waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    return -1;
  }

  // Waits until stdout holds `count` occurrences of `text`.
  bool WaitForOutput(const std::string& text, int count, seconds limit = seconds(30)) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      std::string o = out();
      int seen = 0;
      for (size_t pos = o.find(text); pos != std::string::npos; pos = o.find(text, pos + 1)) ++seen;
      if (seen >= count) return true;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return false;
  }

 private:
  MemFile out_, err_;
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// ----------------------------------------------------------------------------
TEST(LineBuffer, SplitsLinesAcrossChunksAndFlushesTheRest) {
  LineBuffer buffer;
  std::vector<std::string> lines;
  auto emit = [&](std::string_view line) { lines.emplace_back(line); };
  buffer.Append("ab", emit);
  EXPECT_TRUE(lines.empty());
  buffer.Append("c\nde\n\nf", emit);
  EXPECT_EQ(lines, (std::vector<std::string>{"abc\n", "de\n", "\n"}));
  buffer.Flush(emit);
  EXPECT_EQ(lines.back(), "f\n");
  EXPECT_TRUE(buffer.empty());
  buffer.Flush(emit);  // nothing pending: nothing emitted
  EXPECT_EQ(lines.size(), 4u);
}

TEST(LineBuffer, CutsRunawayLines) {
  LineBuffer buffer;
  std::vector<std::string> lines;
  auto emit = [&](std::string_view line) { lines.emplace_back(line); };
  std::string big(LineBuffer::kMaxLineBytes * 2 + 10, 'x');
  buffer.Append(big, emit);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].size(), LineBuffer::kMaxLineBytes + 1);
  buffer.Flush(emit);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2], std::string(10, 'x') + "\n");
}

TEST(Launcher, ValidatesOptions) {
  LaunchOptions o = ShOptions(2, "true");
  EXPECT_TRUE(ValidateLaunchOptions(o).ok());
  o.nproc_per_node = 0;
  EXPECT_TRUE(absl::StrContains(ValidateLaunchOptions(o).message(), "nproc_per_node must be at least 1"));
  o = ShOptions(2, "true");
  o.nnodes = 2;
  o.node_rank = 2;
  EXPECT_TRUE(absl::StrContains(ValidateLaunchOptions(o).message(), "node_rank must be in [0, 1]"));
  o.node_rank = 1;
  EXPECT_TRUE(absl::StrContains(ValidateLaunchOptions(o).message(), "explicit master port"));
  o.master_port = 70000;
  EXPECT_TRUE(absl::StrContains(ValidateLaunchOptions(o).message(), "master_port must be in [0, 65535]"));
  o = ShOptions(2, "true");
  o.command.clear();
  EXPECT_TRUE(absl::StrContains(ValidateLaunchOptions(o).message(), "no command"));
  EXPECT_EQ(Launch(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Launcher, PicksAFreePortThatCanBeBound) {
  absl::StatusOr<int> port = PickFreePort("127.0.0.1");
  ASSERT_TRUE(port.ok()) << port.status();
  ASSERT_GT(*port, 0);
  ASSERT_LE(*port, 65535);
  UniqueFd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  struct sockaddr_in addr {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(*port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(sock.get(), reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
  EXPECT_FALSE(PickFreePort("no-such-host.invalid").ok());
}

// Ports come from below the kernel's ephemeral range, where no outgoing
// connection takes them, and two pickers at once rarely agree (with bind
// port 0 they often do: the kernel hands a just-closed port out again).
TEST(Launcher, PicksPortsBelowTheEphemeralRange) {
  std::ifstream file("/proc/sys/net/ipv4/ip_local_port_range");
  std::stringstream text;
  text << file.rdbuf();
  const int first_ephemeral = ParseEphemeralRange(text.str()).first;
  if (first_ephemeral < 11000) GTEST_SKIP() << "ephemeral range starts at " << first_ephemeral;
  std::set<int> seen;
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<int> port = PickFreePort("127.0.0.1");
    ASSERT_TRUE(port.ok()) << port.status();
    EXPECT_GE(*port, 10000);
    EXPECT_LT(*port, first_ephemeral);
    seen.insert(*port);
  }
  EXPECT_GE(seen.size(), 18u) << "20 picks gave only " << seen.size() << " distinct ports";
}

TEST(Launcher, ParsesTheEphemeralRange) {
  EXPECT_EQ(ParseEphemeralRange("32768\t60999\n"), std::make_pair(32768, 60999));
  EXPECT_EQ(ParseEphemeralRange("1024 65535"), std::make_pair(1024, 65535));
  EXPECT_EQ(ParseEphemeralRange(""), std::make_pair(32768, 60999));
  EXPECT_EQ(ParseEphemeralRange("61000 32768"), std::make_pair(32768, 60999));
}

TEST(Launcher, SetsTheRankEnvironmentOnOneNode) {
  for (int nproc : {1, 3}) {
    LaunchOptions o = ShOptions(nproc, kEnvScript);
    o.extra_env["ZT_TEST_EXTRA"] = "visible";
    o.command[2] = absl::StrCat(kEnvScript, "; echo \"$ZT_TEST_EXTRA\"");
    absl::StatusOr<LaunchResult> r = Launch(o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->exit_code, 0) << r->failure;
    EXPECT_TRUE(r->failure.empty());
    ASSERT_GT(r->master_port, 0);
    ASSERT_EQ(r->ranks.size(), static_cast<size_t>(nproc));
    for (int i = 0; i < nproc; ++i) {
      const RankResult& rank = r->ranks[i];
      EXPECT_EQ(rank.rank, i);
      EXPECT_EQ(rank.local_rank, i);
      EXPECT_EQ(rank.exit_code, 0);
      EXPECT_FALSE(rank.stopped);
      EXPECT_EQ(rank.output,
                absl::StrCat(i, " ", nproc, " ", i, " ", nproc, " 127.0.0.1 ", r->master_port, " 0 0 1 1\nvisible\n"));
    }
  }
}

TEST(Launcher, DefaultsOmpThreadsToCoresPerRank) {
  const char* saved = std::getenv("OMP_NUM_THREADS");
  std::string saved_value = saved ? saved : "";
  ::unsetenv("OMP_NUM_THREADS");
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(::sched_getaffinity(0, sizeof(set), &set), 0);
  const int cores = CPU_COUNT(&set);
  for (int nproc : {1, 2, 3}) {
    LaunchOptions o = ShOptions(nproc, "echo $OMP_NUM_THREADS");
    o.extra_env.clear();
    MemFile notes;
    o.print_notes = true;
    o.err_fd = notes.fd();
    absl::StatusOr<LaunchResult> r = Launch(o);
    ASSERT_TRUE(r.ok()) << r.status();
    int expected = std::max(1, cores / nproc);
    for (const RankResult& rank : r->ranks) EXPECT_EQ(rank.output, absl::StrCat(expected, "\n"));
    EXPECT_TRUE(absl::StrContains(notes.Read(), absl::StrCat("OMP_NUM_THREADS is not set; using ", expected)))
        << notes.Read();
  }
  // A value in the launcher's environment is passed through untouched.
  ::setenv("OMP_NUM_THREADS", "7", 1);
  LaunchOptions o = ShOptions(2, "echo $OMP_NUM_THREADS");
  o.extra_env.clear();
  absl::StatusOr<LaunchResult> r = Launch(o);
  ASSERT_TRUE(r.ok());
  for (const RankResult& rank : r->ranks) EXPECT_EQ(rank.output, "7\n");
  if (saved) {
    ::setenv("OMP_NUM_THREADS", saved_value.c_str(), 1);
  } else {
    ::unsetenv("OMP_NUM_THREADS");
  }
}

TEST(Launcher, TwoNodesAgreeOnRanksAndPort) {
  absl::StatusOr<int> port = PickFreePort("127.0.0.1");
  ASSERT_TRUE(port.ok());
  std::set<int> seen_ranks;
  for (int node = 0; node < 2; ++node) {
    LaunchOptions o = ShOptions(2, kEnvScript);
    o.nnodes = 2;
    o.node_rank = node;
    o.master_port = *port;
    absl::StatusOr<LaunchResult> r = Launch(o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->master_port, *port);
    for (int local = 0; local < 2; ++local) {
      int rank = node * 2 + local;
      seen_ranks.insert(r->ranks[local].rank);
      EXPECT_EQ(r->ranks[local].output,
                absl::StrCat(rank, " 4 ", local, " 2 127.0.0.1 ", *port, " ", node, " ", node, " 2 1\n"));
    }
  }
  EXPECT_EQ(seen_ranks, (std::set<int>{0, 1, 2, 3}));
}

// Every node's launcher names the job alike: by the ranks' command line,
// which is the same on every node (the launcher's own, which a rank forked
// from its fork server would read as /proc/self/cmdline, holds --node-rank);
// a ZT_JOB_ID the user gives wins, and one node draws a fresh id per launch.
TEST(Launcher, NodesNameTheJobByTheRanksCommandLine) {
  absl::StatusOr<int> port = PickFreePort("127.0.0.1");
  ASSERT_TRUE(port.ok());
  const std::string script = "echo \"$ZT_JOB_ID\"";
  std::set<std::string> ids;
  for (int node = 0; node < 2; ++node) {
    LaunchOptions o = ShOptions(1, script);
    o.nnodes = 2;
    o.node_rank = node;
    o.master_port = *port;
    absl::StatusOr<LaunchResult> r = Launch(o);
    ASSERT_TRUE(r.ok()) << r.status();
    ids.insert(r->ranks[0].output);
  }
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(*ids.begin(), CommandLineJobId({"sh", "-c", script}) + "\n");
  LaunchOptions given = ShOptions(1, script);
  given.nnodes = 2;
  given.master_port = *port;
  given.extra_env["ZT_JOB_ID"] = "mine";
  absl::StatusOr<LaunchResult> r = Launch(given);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ranks[0].output, "mine\n");
  LaunchOptions one_node = ShOptions(1, script);
  r = Launch(one_node);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->ranks[0].output, *ids.begin());
  EXPECT_FALSE(absl::StartsWith(r->ranks[0].output, kCommandLineJobPrefix));
}

TEST(Launcher, TwoConcurrentZtLaunchesFormOneWorld) {
  absl::StatusOr<int> port = PickFreePort("127.0.0.1");
  ASSERT_TRUE(port.ok());
  // Each rank waits until all four have written their marker file: the two
  // launchers must run at the same time, as on two real nodes.
  std::string dir = absl::StrCat(::testing::TempDir(), "zt_two_nodes_", ::getpid());
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  std::string script =
      absl::StrCat("touch ", dir, "/$RANK; i=0; while [ $(ls ", dir,
                   " | wc -l) -lt 4 ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; ", kEnvScript);
  std::vector<std::unique_ptr<Child>> nodes;
  for (int node = 0; node < 2; ++node) {
    nodes.push_back(std::make_unique<Child>(
        std::vector<std::string>{kZt, "launch", "--nproc-per-node", "2", "--nnodes", "2", "--node-rank",
                                 std::to_string(node), "--master-addr", "127.0.0.1", "--master-port",
                                 std::to_string(*port), "--", "sh", "-c", script},
        std::vector<std::string>{"OMP_NUM_THREADS=1"}));
  }
  for (int node = 0; node < 2; ++node) {
    ASSERT_EQ(nodes[node]->Wait(), 0) << nodes[node]->err();
    std::vector<std::string> lines = Lines(nodes[node]->out());
    std::sort(lines.begin(), lines.end());
    ASSERT_EQ(lines.size(), 2u) << nodes[node]->out();
    for (int local = 0; local < 2; ++local) {
      int rank = node * 2 + local;
      EXPECT_EQ(lines[local], absl::StrCat("[rank ", rank, "] ", rank, " 4 ", local, " 2 127.0.0.1 ", *port, " ", node,
                                           " ", node, " 2 1"));
    }
  }
  for (int r = 0; r < 4; ++r) std::remove(absl::StrCat(dir, "/", r).c_str());
  ::rmdir(dir.c_str());
}

TEST(Launcher, PrefixesEachLineAndKeepsStderrOnStderr) {
  MemFile out, err;
  LaunchOptions o = ShOptions(2, "echo one; echo two; echo bad >&2; printf 'no newline'; printf 'err tail' >&2");
  o.capture_output = false;
  o.out_fd = out.fd();
  o.err_fd = err.fd();
  absl::StatusOr<LaunchResult> r = Launch(o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0);
  std::multiset<std::string> out_lines, err_lines;
  for (const std::string& line : Lines(out.Read())) out_lines.insert(line);
  for (const std::string& line : Lines(err.Read())) err_lines.insert(line);
  EXPECT_EQ(out_lines, (std::multiset<std::string>{"[rank 0] one", "[rank 0] two", "[rank 0] no newline",
                                                   "[rank 1] one", "[rank 1] two", "[rank 1] no newline"}));
  EXPECT_EQ(err_lines,
            (std::multiset<std::string>{"[rank 0] bad", "[rank 0] err tail", "[rank 1] bad", "[rank 1] err tail"}));
  // Order within one rank's stream is kept.
  std::string text = out.Read();
  EXPECT_LT(text.find("[rank 1] one"), text.find("[rank 1] two"));
}

TEST(Launcher, NeverInterleavesLinesOfDifferentRanks) {
  MemFile out;
  // 4 ranks x 3000 lines of ~400 bytes, written in stdio-sized chunks that cut lines.
  LaunchOptions o = ShOptions(4,
                              "awk -v r=$RANK 'BEGIN { s = sprintf(\"%400s\", \"\"); gsub(/ /, r, s); "
                              "for (i = 0; i < 3000; i++) printf \"%s:%d:%s\\n\", r, i, s }'");
  o.capture_output = false;
  o.out_fd = out.fd();
  absl::StatusOr<LaunchResult> r = Launch(o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->failure;
  std::vector<int> next(4, 0);
  for (const std::string& line : Lines(out.Read())) {
    ASSERT_EQ(line.compare(0, 6, "[rank "), 0) << line.substr(0, 80);
    int rank = line[6] - '0';
    ASSERT_TRUE(rank >= 0 && rank < 4) << line.substr(0, 80);
    std::string expected =
        absl::StrCat("[rank ", rank, "] ", rank, ":", next[rank]++, ":", std::string(400, '0' + rank));
    ASSERT_EQ(line, expected);
  }
  EXPECT_EQ(next, (std::vector<int>{3000, 3000, 3000, 3000}));
}

TEST(Launcher, UnprefixedOutputGoesStraightThrough) {
  MemFile out;
  LaunchOptions o = ShOptions(1, "echo plain");
  o.capture_output = false;
  o.prefix_output = false;
  o.out_fd = out.fd();
  absl::StatusOr<LaunchResult> r = Launch(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(out.Read(), "plain\n");
}

TEST(Launcher, FailingRankStopsTheOthersAndGivesItsExitCode) {
  const std::string token = NewToken();
  LaunchOptions o = ShOptions(4, "if [ $RANK = 1 ]; then sleep 0.2; echo failing; exit 7; fi; sleep 300; echo late");
  o.extra_env["ZT_TEST_TOKEN"] = token;
  absl::StatusOr<LaunchResult> r = Launch(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 7);
  EXPECT_EQ(r->failed_local_rank, 1);
  EXPECT_LT(r->seconds, 120.0) << "the sleeping ranks were not stopped";
  EXPECT_TRUE(absl::StrContains(r->failure, absl::StrCat("rank 1 (pid ", r->ranks[1].pid,
                                                         ") exited with code 7; "
                                                         "stopped ranks 0, 2, 3")))
      << r->failure;
  EXPECT_EQ(r->ranks[1].output, "failing\n");
  EXPECT_FALSE(r->ranks[1].stopped);
  for (int i : {0, 2, 3}) {
    EXPECT_TRUE(r->ranks[i].stopped);
    EXPECT_EQ(r->ranks[i].signal, SIGTERM);
    EXPECT_EQ(r->ranks[i].exit_code, 128 + SIGTERM);
    EXPECT_EQ(r->ranks[i].output, "");
  }
  ExpectNoSurvivors(token);
}

TEST(Launcher, RanksIgnoringSigtermAreKilled) {
  const std::string token = NewToken();
  // Rank 2 fails only once ranks 0 and 1 ignore SIGTERM (each leaves a file).
  std::string dir = absl::StrCat(::testing::TempDir(), "zt_ignore_term_", ::getpid());
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  LaunchOptions o =
      ShOptions(3, absl::StrCat("if [ $RANK = 2 ]; then while [ $(ls ", dir, " | wc -l) -lt 2 ]; do sleep 0.02; done; ",
                                "exit 5; fi; trap '' TERM; touch ", dir, "/$RANK; sleep 300"));
  o.kill_grace = milliseconds(500);
  o.extra_env["ZT_TEST_TOKEN"] = token;
  absl::StatusOr<LaunchResult> r = Launch(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 5);
  for (int i : {0, 1}) EXPECT_EQ(r->ranks[i].signal, SIGKILL);
  EXPECT_TRUE(absl::StrContains(r->failure, "ranks 0, 1 ignored SIGTERM for 0.5 s and were killed")) << r->failure;
  ExpectNoSurvivors(token);
  for (int rank : {0, 1}) std::remove(absl::StrCat(dir, "/", rank).c_str());
  ::rmdir(dir.c_str());
}

TEST(Launcher, DeathBySignalIsReportedAsSuch) {
  LaunchOptions o = ShOptions(2, "if [ $RANK = 0 ]; then kill -SEGV $$; fi; sleep 300");
  absl::StatusOr<LaunchResult> r = Launch(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 128 + SIGSEGV);
  EXPECT_EQ(r->failed_local_rank, 0);
  EXPECT_EQ(r->ranks[0].signal, SIGSEGV);
  EXPECT_TRUE(absl::StrContains(r->failure, "was killed by signal 11 (SIGSEGV); stopped rank 1")) << r->failure;
}

TEST(Launcher, TimeoutStopsEveryRank) {
  const std::string token = NewToken();
  LaunchOptions o = ShOptions(2, "sleep 300");
  o.timeout = milliseconds(500);
  o.extra_env["ZT_TEST_TOKEN"] = token;
  absl::StatusOr<LaunchResult> r = Launch(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, kTimeoutExitCode);
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->failed_local_rank, -1);
  for (const RankResult& rank : r->ranks) EXPECT_TRUE(rank.timed_out && rank.stopped);
  EXPECT_TRUE(absl::StrContains(r->failure, "timed out after 0.5 s; stopped ranks 0, 1")) << r->failure;
  ExpectNoSurvivors(token);
}

// stop_check (multi-node restarts stop a node's ranks with it when another
// node failed): asked while the ranks run; its reason stops every rank.
TEST(Launcher, StopCheckStopsEveryRankWithItsReason) {
  const std::string token = NewToken();
  LaunchOptions o = ShOptions(2, "sleep 300");
  o.extra_env["ZT_TEST_TOKEN"] = token;
  int asked = 0;
  o.stop_check = [&asked]() -> std::optional<std::string> {
    return ++asked < 3 ? std::nullopt : std::optional<std::string>("node 1 failed (rank 2 exited with code 3)");
  };
  absl::StatusOr<LaunchResult> r = Launch(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(asked, 3) << "not asked again once the stop began";
  EXPECT_EQ(r->exit_code, kStoppedExitCode);
  EXPECT_EQ(r->failed_local_rank, -1);
  EXPECT_EQ(r->stopped_for, "node 1 failed (rank 2 exited with code 3)");
  for (const RankResult& rank : r->ranks) EXPECT_TRUE(rank.stopped);
  EXPECT_EQ(r->failure, "stopped: node 1 failed (rank 2 exited with code 3); stopped ranks 0, 1");
  ExpectNoSurvivors(token);
  // Ranks that all exit 0 before it says anything: a success.
  LaunchOptions quick = ShOptions(2, "true");
  quick.stop_check = [] { return std::optional<std::string>(); };
  absl::StatusOr<LaunchResult> ok = Launch(quick);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->exit_code, 0);
  EXPECT_TRUE(ok->stopped_for.empty());
}

TEST(Launcher, MayFailRanksDoNotStopTheOthers) {
  LaunchOptions o = ShOptions(3, "if [ $RANK = 0 ]; then exit 9; fi; sleep 0.5; echo done");
  o.may_fail_ranks = {0};
  absl::StatusOr<LaunchResult> r = Launch(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0) << r->failure;
  EXPECT_EQ(r->ranks[0].exit_code, 9);
  for (int i : {1, 2}) EXPECT_EQ(r->ranks[i].output, "done\n");
}

TEST(Launcher, BackgroundProcessesOfFinishedRanksDoNotHangOrSurvive) {
  const std::string token = NewToken();
  // The background sleep keeps the rank's stdout pipe open after the rank exits.
  LaunchOptions o = ShOptions(2, "sleep 300 & echo started");
  o.kill_grace = milliseconds(500);
  o.extra_env["ZT_TEST_TOKEN"] = token;
  absl::StatusOr<LaunchResult> r = Launch(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0) << r->failure;
  for (const RankResult& rank : r->ranks) EXPECT_EQ(rank.output, "started\n");
  EXPECT_LT(r->seconds, 120.0);
  ExpectNoSurvivors(token);
}

TEST(Launcher, CommandThatCannotRunIsAClearError) {
  LaunchOptions o = ShOptions(2, "");
  o.command = {"zt-no-such-command-xyz", "--flag"};
  absl::StatusOr<LaunchResult> r = Launch(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "cannot execute 'zt-no-such-command-xyz'")) << r.status();

  o.command = {"/etc"};
  r = Launch(o);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "'/etc': it is a directory")) << r.status();

  // Executable bit but no valid format: execve itself fails in the child.
  std::string path = absl::StrCat(::testing::TempDir(), "zt_not_a_program_", ::getpid());
  std::ofstream(path) << "\x7f"
                      << "ELF garbage";
  ASSERT_EQ(::chmod(path.c_str(), 0700), 0);
  o.command = {path};
  r = Launch(o);
  std::remove(path.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), absl::StrCat("cannot execute '", path, "' (rank 0)")))
      << r.status();
}

// ----------------------------------------------------------------------------
// The `zt launch` command.

TEST(ZtLaunch, RejectsBadFlagsWithClearErrors) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--nproc-per-node", "2"}, "missing the command to run"},
      {{"--", "true"}, "--nproc-per-node N is required"},
      {{"--nproc-per-node", "-1", "--", "true"}, "--nproc-per-node must be in [1, 4096], got -1"},
      {{"--nproc-per-node", "two", "--", "true"}, "--nproc-per-node needs an integer, got 'two'"},
      {{"--nproc-per-node", "2", "--nnodes", "2", "--node-rank", "2", "--master-addr", "h", "--master-port", "1", "--",
        "true"},
       "--node-rank must be in [0, 1] with --nnodes 2, got 2"},
      {{"--nproc-per-node", "2", "--nnodes", "2", "--master-port", "29500", "--", "true"}, "needs --master-addr"},
      {{"--nproc-per-node", "2", "--nnodes", "2", "--master-addr", "10.0.0.1", "--", "true"}, "needs --master-port"},
      {{"--nproc-per-node", "2", "--master-port", "70000", "--", "true"}, "--master-port must be in [1, 65535]"},
      {{"--nproc-per-node", "2", "--timeout", "-3", "--", "true"}, "--timeout must be a number of seconds >= 0"},
      {{"--nproc-per-node", "2", "true"}, "unexpected argument 'true' before '--'"},
      {{"--nproc-per-nod", "2", "--", "true"}, "did you mean --nproc-per-node?"},
      {{"--nproc-per-node", "2", "--nnodes", "2:1", "--", "true"}, "--nnodes takes N or MIN:MAX"},
      {{"--nproc-per-node", "2", "--nnodes", "1:two", "--", "true"}, "--nnodes takes N or MIN:MAX"},
      {{"--nproc-per-node", "2", "--nnodes", "0", "--", "true"}, "--nnodes takes N or MIN:MAX"},
      {{"--nproc-per-node", "2", "--nnodes", "1:2", "--node-rank", "2", "--master-addr", "h", "--master-port", "1",
        "--", "true"},
       "--node-rank must be in [0, 1] with --nnodes 1:2, got 2"},
      {{"--nproc-per-node", "2", "--join-timeout", "5", "--", "true"}, "--join-timeout applies only where"},
      {{"--nproc-per-node", "2", "--nnodes", "2", "--master-addr", "h", "--master-port", "1", "--max-restarts", "1",
        "--last-call", "0", "--", "true"},
       "--last-call must be a number of seconds in (0, 1e6]"},
      {{"--nproc-per-node", "2", "--memory-copies", "--", "true"}, "--memory-copies serves restarts"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {kZt, "launch"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    Child child(argv);
    EXPECT_EQ(child.Wait(), 2) << absl::StrJoin(c.args, " ");
    EXPECT_TRUE(absl::StrContains(child.err(), c.message)) << absl::StrJoin(c.args, " ") << "\n" << child.err();
    EXPECT_EQ(child.out(), "");
  }
}

TEST(ZtLaunch, HelpDescribesTheCommand) {
  Child child({kZt, "launch", "--help"});
  EXPECT_EQ(child.Wait(), 0);
  EXPECT_TRUE(absl::StrContains(child.out(), "--nproc-per-node")) << child.out();
  EXPECT_TRUE(absl::StrContains(child.out(), "--master-port")) << child.out();
}

TEST(ZtLaunch, PropagatesTheFailingRanksExitCode) {
  Child child({kZt, "launch", "--nproc-per-node", "3", "--", "sh", "-c",
               "echo hi; if [ $RANK = 2 ]; then exit 3; fi; sleep 300"});
  EXPECT_EQ(child.Wait(), 3);
  EXPECT_TRUE(absl::StrContains(child.err(), "zt launch: rank 2 (pid ")) << child.err();
  EXPECT_TRUE(absl::StrContains(child.err(), "exited with code 3; stopped ranks 0, 1")) << child.err();
  EXPECT_TRUE(absl::StrContains(child.out(), "[rank 2] hi")) << child.out();
}

TEST(ZtLaunch, CommandNotFoundNamesIt) {
  Child child({kZt, "launch", "--nproc-per-node", "2", "--", "zt-no-such-command-xyz"});
  EXPECT_EQ(child.Wait(), 127);
  EXPECT_TRUE(absl::StrContains(child.err(), "zt launch: cannot execute 'zt-no-such-command-xyz': command not found"))
      << child.err();
}

TEST(ZtLaunch, ForwardsSigtermAndSigintToTheRanks) {
  for (int sig : {SIGTERM, SIGINT}) {
    const std::string name = sig == SIGTERM ? "TERM" : "INT";
    const std::string token = NewToken();
    Child child(
        {kZt, "launch", "--nproc-per-node", "2", "--", "sh", "-c",
         absl::StrCat("trap 'echo got ", name, "; exit 0' ", name, "; echo ready; while :; do sleep 0.05; done")},
        {absl::StrCat("ZT_TEST_TOKEN=", token), "OMP_NUM_THREADS=1"});
    ASSERT_TRUE(child.WaitForOutput("ready", 2)) << child.out() << child.err();
    ASSERT_EQ(::kill(child.pid(), sig), 0);
    EXPECT_EQ(child.Wait(), 128 + sig) << child.err();
    EXPECT_TRUE(absl::StrContains(child.out(), "[rank 0] got " + name)) << child.out();
    EXPECT_TRUE(absl::StrContains(child.out(), "[rank 1] got " + name)) << child.out();
    EXPECT_TRUE(absl::StrContains(child.err(), absl::StrCat("interrupted by SIG", name, "; forwarded to ranks 0, 1")))
        << child.err();
    ExpectNoSurvivors(token);
  }
}

TEST(ZtLaunch, ASecondInterruptKillsRanksThatIgnoredTheFirst) {
  const std::string token = NewToken();
  // The ranks survive SIGTERM; a kill grace longer than the wait below means
  // only the second interrupt can end them in time.
  Child child({kZt, "launch", "--nproc-per-node", "2", "--kill-grace", "300", "--", "sh", "-c",
               "trap 'echo got TERM' TERM; echo ready; while :; do sleep 0.05; done"},
              {absl::StrCat("ZT_TEST_TOKEN=", token), "OMP_NUM_THREADS=1"});
  ASSERT_TRUE(child.WaitForOutput("ready", 2)) << child.out() << child.err();
  ASSERT_EQ(::kill(child.pid(), SIGTERM), 0);
  ASSERT_TRUE(child.WaitForOutput("got TERM", 2)) << child.out() << child.err();
  ASSERT_EQ(::kill(child.pid(), SIGTERM), 0);
  EXPECT_EQ(child.Wait(seconds(60)), 128 + SIGTERM) << child.err();
  EXPECT_TRUE(absl::StrContains(child.err(), "interrupted by SIGTERM; forwarded to ranks 0, 1")) << child.err();
  ExpectNoSurvivors(token);
}

TEST(ZtLaunch, RanksDieWithAKilledLauncher) {
  const std::string token = NewToken();
  Child child({kZt, "launch", "--nproc-per-node", "2", "--", "sh", "-c", "echo ready; exec sleep 300"},
              {absl::StrCat("ZT_TEST_TOKEN=", token), "OMP_NUM_THREADS=1"});
  ASSERT_TRUE(child.WaitForOutput("ready", 2)) << child.out() << child.err();
  ASSERT_EQ(::kill(child.pid(), SIGKILL), 0);
  EXPECT_EQ(child.Wait(), 128 + SIGKILL);
  ExpectNoSurvivors(token);
}

// ----------------------------------------------------------------------------
// Restarts (launch/restarts.h).

// The launcher's lines, written to a memory file.
class ErrLines {
 public:
  ErrLines() : fd_(::memfd_create("restart-lines", 0)) {}
  int fd() const { return fd_.get(); }
  std::string Text() const {
    std::string text;
    char buf[4096];
    ssize_t n;
    off_t at = 0;
    while ((n = ::pread(fd_.get(), buf, sizeof(buf), at)) > 0) {
      text.append(buf, static_cast<size_t>(n));
      at += n;
    }
    return text;
  }

 private:
  UniqueFd fd_;
};

TEST(Restarts, RestartsUntilAnAttemptSucceeds) {
  // Rank 1 fails in attempts 0 and 1; attempt 2 succeeds.
  LaunchOptions o = ShOptions(2,
                              "echo $TORCHELASTIC_RESTART_COUNT $TORCHELASTIC_MAX_RESTARTS; "
                              "if [ $TORCHELASTIC_RESTART_COUNT -lt 2 ]; then if [ $RANK = 1 ]; then exit 3; fi; "
                              "sleep 300; fi");
  ErrLines err;
  RestartOptions r;
  r.max_restarts = 5;
  r.who = "zt test";
  r.err_fd = err.fd();
  absl::StatusOr<RestartedLaunch> out = LaunchWithRestarts(o, r);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->last.exit_code, 0) << out->last.failure;
  EXPECT_EQ(out->restarts, 2);
  EXPECT_EQ(out->last.ranks[0].output, "2 5\n");
  const std::string text = err.Text();
  EXPECT_TRUE(absl::StrContains(text, "zt test: restart 1 of 5 after ")) << text;
  EXPECT_TRUE(absl::StrContains(text, "s: rank 1 (pid ")) << text;
  EXPECT_TRUE(absl::StrContains(text, "zt test: restart 2 of 5 after ")) << text;
  EXPECT_FALSE(absl::StrContains(text, "restart 3")) << text;
}

TEST(Restarts, WhenTheyRunOutTheLastFailureIsTheResult) {
  LaunchOptions o = ShOptions(2, "if [ $RANK = 0 ]; then exit 9; fi; sleep 300");
  ErrLines err;
  RestartOptions r;
  r.max_restarts = 2;
  r.err_fd = err.fd();
  absl::StatusOr<RestartedLaunch> out = LaunchWithRestarts(o, r);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->last.exit_code, 9);
  EXPECT_EQ(out->restarts, 2);
  EXPECT_TRUE(absl::StrContains(err.Text(),
                                "zt launch: all 2 restarts used (--max-restarts); the last attempt "
                                "failed: rank 0 (pid "))
      << err.Text();
}

TEST(Restarts, UsageErrorsTimeoutsAndSeveralNodesAreNotRestarted) {
  ErrLines err;
  RestartOptions r;
  r.max_restarts = 4;
  r.err_fd = err.fd();
  // Exit code 2: a usage or configuration error that a restart would repeat.
  absl::StatusOr<RestartedLaunch> usage = LaunchWithRestarts(ShOptions(2, "exit 2"), r);
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_EQ(usage->last.exit_code, 2);
  EXPECT_EQ(usage->restarts, 0);
  EXPECT_TRUE(absl::StrContains(err.Text(), "zt launch: not restarting: a rank exited with code 2")) << err.Text();
  // The job's own time limit.
  LaunchOptions slow = ShOptions(1, "sleep 300");
  slow.timeout = milliseconds(300);
  absl::StatusOr<RestartedLaunch> timed = LaunchWithRestarts(slow, r);
  ASSERT_TRUE(timed.ok()) << timed.status();
  EXPECT_TRUE(timed->last.timed_out);
  EXPECT_EQ(timed->restarts, 0);
  EXPECT_TRUE(absl::StrContains(err.Text(), "not restarting: the job ran past its --timeout")) << err.Text();
  // Several nodes: refused before anything starts.
  LaunchOptions nodes = ShOptions(1, "true");
  nodes.nnodes = 2;
  nodes.master_port = 29999;
  absl::StatusOr<RestartedLaunch> refused = LaunchWithRestarts(nodes, r);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "LaunchNodeRounds")) << refused.status();
  r.max_restarts = -1;
  EXPECT_EQ(LaunchWithRestarts(ShOptions(1, "true"), r).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Restarts, TheRankEnvironmentCarriesTheAttempt) {
  auto lookup = [](std::map<std::string, std::string> vars) {
    return [vars](const std::string& k) -> std::optional<std::string> {
      auto it = vars.find(k);
      return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
  };
  absl::StatusOr<RankEnv> env =
      ReadRankEnv(lookup({{"TORCHELASTIC_RESTART_COUNT", "3"}, {"TORCHELASTIC_MAX_RESTARTS", "7"}}));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->restart_count, 3);
  EXPECT_EQ(env->max_restarts, 7);
  absl::StatusOr<RankEnv> bad = ReadRankEnv(lookup({{"TORCHELASTIC_RESTART_COUNT", "x"}}));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "TORCHELASTIC_RESTART_COUNT")) << bad.status();
}

}  // namespace
}  // namespace zt::comm
