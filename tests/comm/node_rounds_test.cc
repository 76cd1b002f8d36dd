// Restarts and elastic membership across nodes (launch/node_rounds.h), end
// to end: several `zt launch --node-rank R` processes on this machine's
// loopback, each a node, with `sh` scripts as ranks that record the
// environment each attempt gave them. A failure on one node restarts every
// node together; a lost node leaves the others at the smaller world; a node
// that comes late joins at the next restart; a usage error, disagreeing
// nodes, a lost node 0 and too few nodes end the job naming the cause; and
// no process is left behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "launch/free_port.h"
#include "tests/testing/background_shell.h"
#include "tests/testing/scratch_dir.h"

namespace zt::comm {
namespace {

using Clock = std::chrono::steady_clock;
using zt::testing::ReadFileBytes;
using zt::testing::ScratchDir;

constexpr auto kBound = std::chrono::seconds(60);  // every case ends well within this

// One node's `zt launch`, its output in `log`.
struct Node {
  pid_t pid = -1;
  std::string log;
};

class NodeRounds : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<ScratchDir>("zt_node_rounds");
    absl::StatusOr<int> port = PickFreePort("127.0.0.1");
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
    nodes_.reserve(8);  // Start returns references into it
  }
  void TearDown() override {
    for (Node& n : nodes_) {
      if (n.pid > 0 && Wait(n, std::chrono::milliseconds(0)) == -1) {
        ::kill(n.pid, SIGKILL);
        Wait(n, std::chrono::seconds(10));
      }
    }
  }

  // The ranks' script: records "rank attempt world node job agent port" in
  // <dir>/env.<rank>.<attempt>, then runs `body`.
  std::string Script(const std::string& name, const std::string& body) {
    const std::string path = dir_->File(name);
    std::ofstream(path) << "#!/bin/sh\n"
                        << "echo \"$RANK $TORCHELASTIC_RESTART_COUNT $WORLD_SIZE $GROUP_RANK $ZT_JOB_ID "
                           "$TORCHELASTIC_USE_AGENT_STORE $MASTER_PORT\" > "
                        << dir_->path() << "/env.$RANK.$TORCHELASTIC_RESTART_COUNT\n"
                        << body << "\n";
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
    return path;
  }

  // Starts node `rank` of a job: `flags` after `zt launch`, then the script.
  Node& Start(int rank, const std::string& flags, const std::string& script, int nproc = 2) {
    EXPECT_LT(nodes_.size(), nodes_.capacity());
    Node node;
    node.log = dir_->File(absl::StrCat("node", rank, ".", nodes_.size(), ".log"));
    const std::string command =
        absl::StrCat("exec env OMP_NUM_THREADS=1 ", ZT_BINARY_DIR, "/bin/zt launch --nproc-per-node ", nproc,
                     " --master-addr 127.0.0.1 --master-port ", port_, " --node-rank ", rank, " ", flags, " -- ",
                     script, " > ", node.log, " 2>&1");
    node.pid = zt::testing::StartShell(command);
    EXPECT_GT(node.pid, 0) << command;
    nodes_.push_back(node);
    return nodes_.back();
  }

  // The exit code (128 + signal), or -1 while it still runs after `timeout`.
  static int Wait(Node& node, std::chrono::milliseconds timeout) {
    const int code = zt::testing::WaitShell(node.pid, timeout);
    if (code >= 0) node.pid = -1;  // reaped
    return code;
  }

  // Every node started so far exits with `code` within kBound and says `text`.
  void ExpectEveryNodeEnds(int code, const std::string& text) {
    for (Node& n : nodes_) {
      EXPECT_EQ(Wait(n, kBound), code) << ReadFileBytes(n.log);
      EXPECT_TRUE(absl::StrContains(ReadFileBytes(n.log), text)) << ReadFileBytes(n.log);
    }
  }

  // What rank `rank` recorded in attempt `attempt`: the fields, or empty when
  // it did not run then.
  std::vector<std::string> Env(int rank, int attempt) const {
    const std::string text = ReadFileBytes(dir_->File(absl::StrCat("env.", rank, ".", attempt)));
    return absl::StrSplit(text.substr(0, text.find('\n')), ' ', absl::SkipEmpty());
  }
  bool Ran(int rank, int attempt) const { return std::filesystem::exists(Env0(rank, attempt)); }
  std::string Env0(int rank, int attempt) const { return dir_->File(absl::StrCat("env.", rank, ".", attempt)); }

  // Waits until `path` exists (at most 60 s).
  static bool AwaitFile(const std::string& path) {
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (!std::filesystem::exists(path) && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return std::filesystem::exists(path);
  }

  std::unique_ptr<ScratchDir> dir_;
  int port_ = 0;
  std::vector<Node> nodes_;
};

// Fields of Env(): rank, attempt, world, group rank, job id, agent store, port.
enum { kRank, kAttempt, kWorld, kGroup, kJob, kAgent, kPort };

TEST_F(NodeRounds, AFailureOnOneNodeRestartsEveryNodeTogether) {
  // Rank 2 (node 1) fails in the first attempt; node 0's ranks would sleep
  // for 300 s there, so the job ends in time only if node 1's failure stops them.
  const std::string script = Script("job.sh",
                                    "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then\n"
                                    "  if [ \"$RANK\" = 2 ]; then sleep 1; exit 3; fi\n"
                                    "  sleep 300\n"
                                    "fi\n"
                                    "sleep 1");
  const std::string flags = "--nnodes 2 --max-restarts 2";
  Start(0, flags, script);
  Start(1, flags, script);
  for (Node& n : nodes_) EXPECT_EQ(Wait(n, kBound), 0) << ReadFileBytes(n.log);
  for (const Node& n : nodes_) {
    const std::string log = ReadFileBytes(n.log);
    EXPECT_TRUE(absl::StrContains(log, "zt launch: restart 1 of 2 after ")) << log;
    EXPECT_TRUE(absl::StrContains(log, "node 1: rank 2 (pid ")) << log;
    EXPECT_TRUE(absl::StrContains(log, "exited with code 3")) << log;
  }
  const std::string job = Env(0, 0).size() > kJob ? Env(0, 0)[kJob] : "";
  EXPECT_FALSE(job.empty());
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (int rank = 0; rank < 4; ++rank) {
      const std::vector<std::string> e = Env(rank, attempt);
      ASSERT_EQ(e.size(), 7u) << "rank " << rank << " attempt " << attempt;
      EXPECT_EQ(e[kWorld], "4");
      EXPECT_EQ(e[kGroup], rank < 2 ? "0" : "1");
      EXPECT_EQ(e[kJob], job) << "every node's ranks get node 0's job id";
      EXPECT_EQ(e[kAgent], "True") << "node 0's launcher hosts the store";
      EXPECT_EQ(e[kPort], std::to_string(port_));
    }
  }
  EXPECT_FALSE(Ran(0, 2));
}

TEST_F(NodeRounds, ALostNodeLeavesTheOthersAtTheSmallerWorld) {
  // Node 1 first: it waits for node 0's store, so both are in the first round.
  const std::string script = Script("job.sh", "sleep 2");
  const std::string flags = "--nnodes 1:2 --max-restarts 2 --last-call 5";
  Node& lost = Start(1, flags, script);
  Node& survivor = Start(0, flags, script);
  ASSERT_TRUE(AwaitFile(Env0(2, 0)));
  ::kill(lost.pid, SIGKILL);  // node 1's launcher; its ranks die with it (PR_SET_PDEATHSIG)
  EXPECT_EQ(Wait(lost, kBound), 128 + SIGKILL);
  EXPECT_EQ(Wait(survivor, kBound), 0) << ReadFileBytes(survivor.log);
  const std::string log = ReadFileBytes(survivor.log);
  EXPECT_TRUE(absl::StrContains(log, "node 1's launcher stopped answering for 5 s before reporting")) << log;
  EXPECT_TRUE(absl::StrContains(log, "now node 0 (world size 2, was 4 on nodes 0, 1)")) << log;
  ASSERT_EQ(Env(0, 1).size(), 7u) << log;
  EXPECT_EQ(Env(0, 1)[kWorld], "2");
  EXPECT_EQ(Env(1, 1)[kWorld], "2");
  EXPECT_FALSE(Ran(2, 1));
}

TEST_F(NodeRounds, ANodeThatComesLateJoinsAtTheNextRestart) {
  // Node 0 starts alone after the last call; its rank 0 fails once node 1
  // waits, and the restart takes node 1 in.
  const std::string script = Script("job.sh",
                                    "if [ \"$RANK\" = 0 ] && [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then\n"
                                    "  while [ ! -e " +
                                        dir_->File("node1.waiting") +
                                        " ]; do sleep 0.05; done\n"
                                        "  exit 3\n"
                                        "fi\n"
                                        "sleep 1");
  const std::string flags = "--nnodes 1:2 --max-restarts 2 --join-timeout 5 --last-call 1";
  Node& first = Start(0, flags, script);
  ASSERT_TRUE(AwaitFile(Env0(0, 0)));
  Node& late = Start(1, flags, script);
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (!absl::StrContains(ReadFileBytes(late.log), "joins at the next restart") && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::ofstream(dir_->File("node1.waiting")) << "1";
  EXPECT_EQ(Wait(first, kBound), 0) << ReadFileBytes(first.log);
  EXPECT_EQ(Wait(late, kBound), 0) << ReadFileBytes(late.log);
  const std::string log = ReadFileBytes(first.log);
  EXPECT_TRUE(absl::StrContains(log, "starting on node 0 of --nnodes 1:2 (world size 2)")) << log;
  EXPECT_TRUE(absl::StrContains(log, "now nodes 0, 1 (world size 4, was 2 on node 0)")) << log;
  ASSERT_EQ(Env(0, 0).size(), 7u);
  EXPECT_EQ(Env(0, 0)[kWorld], "2");
  EXPECT_FALSE(Ran(2, 0));
  ASSERT_EQ(Env(3, 1).size(), 7u) << ReadFileBytes(late.log);
  EXPECT_EQ(Env(3, 1)[kWorld], "4");
  EXPECT_EQ(Env(3, 1)[kGroup], "1");
}

TEST_F(NodeRounds, ANodeWaitingToBeTakenInEndsWithTheJob) {
  const std::string script = Script("job.sh", "sleep 3");
  const std::string flags = "--nnodes 1:2 --max-restarts 2 --last-call 1";
  Node& first = Start(0, flags, script);
  ASSERT_TRUE(AwaitFile(Env0(0, 0)));
  Node& late = Start(1, flags, script);
  EXPECT_EQ(Wait(first, kBound), 0) << ReadFileBytes(first.log);
  EXPECT_EQ(Wait(late, kBound), 0) << ReadFileBytes(late.log);
  const std::string log = ReadFileBytes(late.log);
  EXPECT_TRUE(absl::StrContains(log, "node 1: the job ended (exit code 0) before this node was taken in")) << log;
  EXPECT_FALSE(absl::StrContains(log, "lost the job's rendezvous store")) << log;
  EXPECT_FALSE(Ran(2, 0));
}

// Node 0's ranks end long before node 1's: node 1 is waited for (its
// launcher beats), not taken as gone, and the job succeeds in one attempt.
TEST_F(NodeRounds, AMemberWhoseRanksRunLongerIsWaitedFor) {
  const std::string script = Script("job.sh", "if [ \"$GROUP_RANK\" = 1 ]; then sleep 8; fi");
  const std::string flags = "--nnodes 2 --max-restarts 1";
  Start(0, flags, script);
  Start(1, flags, script);
  for (Node& n : nodes_) {
    EXPECT_EQ(Wait(n, kBound), 0) << ReadFileBytes(n.log);
    EXPECT_FALSE(absl::StrContains(ReadFileBytes(n.log), "restart 1")) << ReadFileBytes(n.log);
  }
  EXPECT_FALSE(Ran(0, 1));
}

TEST_F(NodeRounds, AUsageErrorOnOneNodeStopsEveryNodeWithItsCode) {
  const std::string script = Script("job.sh", "if [ \"$RANK\" = 3 ]; then exit 2; fi\nsleep 300");
  const std::string flags = "--nnodes 2 --max-restarts 3";
  Start(0, flags, script);
  Start(1, flags, script);
  ExpectEveryNodeEnds(2, "not restarting: node 1: a rank exited with code 2");
  EXPECT_FALSE(Ran(0, 1));
}

TEST_F(NodeRounds, WhenTheRestartsRunOutEveryNodeExitsWithTheFailuresCode) {
  // The failing rank is on node 1: node 0, whose ranks were stopped, exits with its code too.
  const std::string script = Script("job.sh", "if [ \"$RANK\" = 3 ]; then exit 5; fi\nsleep 300");
  const std::string flags = "--nnodes 2 --max-restarts 1";
  Start(0, flags, script);
  Start(1, flags, script);
  ExpectEveryNodeEnds(5, "all 1 restarts used (--max-restarts)");
  for (const Node& n : nodes_) {
    EXPECT_TRUE(absl::StrContains(ReadFileBytes(n.log), "restart 1 of 1 after ")) << ReadFileBytes(n.log);
  }
  EXPECT_FALSE(Ran(0, 2));
}

TEST_F(NodeRounds, NodesThatDisagreeAreNamedOnEveryNode) {
  const std::string script = Script("job.sh", "sleep 1");
  Start(0, "--nnodes 2 --max-restarts 1", script, 2);
  Start(1, "--nnodes 2 --max-restarts 1", script, 1);
  ExpectEveryNodeEnds(2, "node 1 runs --nproc-per-node 1 but node 0 runs 2");
  EXPECT_FALSE(Ran(0, 0)) << "no rank starts in a job whose nodes disagree";
}

// --memory-copies is compared like the rest: the ranks of every node must
// agree on exchanging checkpoint copies (engine/neighbour_copies.h).
TEST_F(NodeRounds, NodesThatDisagreeOnMemoryCopiesAreNamed) {
  const std::string script = Script("job.sh", "sleep 1");
  Start(0, "--nnodes 2 --max-restarts 1 --memory-copies", script, 1);
  Start(1, "--nnodes 2 --max-restarts 1", script, 1);
  ExpectEveryNodeEnds(2, "node 1 runs --memory-copies off but node 0 runs on");
  EXPECT_FALSE(Ran(0, 0));
}

// Where every node gives it, each node's ranks get a memory folder of their
// node's own (two nodes may share one tmpfs, as here), gone with the job.
TEST_F(NodeRounds, EachNodeLendsItsRanksAMemoryFolderOfItsOwn) {
  const std::string script =
      Script("job.sh", absl::StrCat("echo \"$ZT_MEMORY_COPIES_DIR\" > ", dir_->path(),
                                    "/copies.$RANK && test -d \"$ZT_MEMORY_COPIES_DIR\" && sleep 1"));
  Start(0, "--nnodes 2 --max-restarts 1 --memory-copies", script, 1);
  Start(1, "--nnodes 2 --max-restarts 1 --memory-copies", script, 1);
  ExpectEveryNodeEnds(0, "");
  std::string folders[2];
  for (int rank : {0, 1}) {
    folders[rank] = std::string(absl::StripAsciiWhitespace(ReadFileBytes(dir_->File(absl::StrCat("copies.", rank)))));
    EXPECT_TRUE(absl::StartsWith(folders[rank], "/dev/shm/zt-copies-")) << folders[rank];
    EXPECT_TRUE(absl::EndsWith(folders[rank], absl::StrCat("-node", rank))) << folders[rank];
    EXPECT_FALSE(std::filesystem::exists(folders[rank])) << "outlived the job";
  }
  EXPECT_NE(folders[0], folders[1]);
}

TEST_F(NodeRounds, TwoLaunchersWithOneNodeRankAreRefused) {
  const std::string script = Script("job.sh", "sleep 1");
  const std::string flags = "--nnodes 3 --max-restarts 1 --join-timeout 8";
  Node& zero = Start(0, flags, script);
  Node& one = Start(1, flags, script);
  Node& again = Start(1, flags, script);
  // Whichever of the two node-1 launchers comes second is refused; the
  // first waits with node 0 for node 2, which never comes: both end at the
  // join timeout, naming it.
  const int codes[] = {Wait(one, kBound), Wait(again, kBound)};
  const std::string logs[] = {ReadFileBytes(one.log), ReadFileBytes(again.log)};
  int refused = 0;
  for (int i = 0; i < 2; ++i) {
    if (absl::StrContains(logs[i], "--node-rank 1 is already taken in this job")) {
      ++refused;
      EXPECT_NE(codes[i], 0);
    } else {
      EXPECT_EQ(codes[i], 1) << logs[i];
      EXPECT_TRUE(absl::StrContains(logs[i], "(missing: 2)")) << logs[i];
    }
  }
  EXPECT_EQ(refused, 1) << logs[0] << "\n---\n" << logs[1];
  EXPECT_EQ(Wait(zero, kBound), 1) << ReadFileBytes(zero.log);
  const std::string log = ReadFileBytes(zero.log);
  EXPECT_TRUE(absl::StrContains(log, "only nodes 0, 1 joined the job within 8 s (--join-timeout)")) << log;
  EXPECT_TRUE(absl::StrContains(log, "(missing: 2)")) << log;
}

// A node whose ranks cannot start (here: its command is missing) ends the
// job on every node, naming it, instead of the others waiting for it to
// rejoin or reading a lost store.
TEST_F(NodeRounds, ANodeThatCannotStartItsRanksEndsTheJobNamingIt) {
  const std::string script = Script("job.sh", "sleep 300");
  // The same arguments (the job's identity leaves argv[0] out), a path that does not exist.
  const std::string missing = dir_->File("missing/job.sh");
  for (int bad : {0, 1}) {
    SCOPED_TRACE(absl::StrCat("node ", bad, " cannot start"));
    TearDown();  // the first pass's launchers, should one still run
    nodes_.clear();
    const std::string flags = "--nnodes 2 --max-restarts 3";
    Node& zero = Start(0, flags, bad == 0 ? missing : script);
    Node& one = Start(1, flags, bad == 1 ? missing : script);
    EXPECT_GT(Wait(zero, kBound), 0);
    EXPECT_GT(Wait(one, kBound), 0);
    const std::string other = ReadFileBytes((bad == 0 ? one : zero).log);
    EXPECT_TRUE(absl::StrContains(other, absl::StrCat("node ", bad, " could not start its ranks: cannot execute")))
        << other;
    EXPECT_FALSE(absl::StrContains(other, "lost the job's rendezvous store")) << other;
  }
}

TEST_F(NodeRounds, LosingNodeZeroEndsTheOtherNodesNamingIt) {
  const std::string script = Script("job.sh", "sleep 300");
  const std::string flags = "--nnodes 2 --max-restarts 3";
  Node& zero = Start(0, flags, script);
  Node& one = Start(1, flags, script);
  ASSERT_TRUE(AwaitFile(Env0(3, 0)));
  ::kill(zero.pid, SIGKILL);
  EXPECT_EQ(Wait(zero, kBound), 128 + SIGKILL);
  // Node 1's ranks sleep 300 s: it ends in time only by stopping them itself.
  EXPECT_NE(Wait(one, kBound), 0);
  const std::string log = ReadFileBytes(one.log);
  EXPECT_TRUE(absl::StrContains(log, "lost the job's rendezvous store at 127.0.0.1:")) << log;
  EXPECT_TRUE(absl::StrContains(log, "hosted by node 0's zt launch")) << log;
}

}  // namespace
}  // namespace zt::comm
