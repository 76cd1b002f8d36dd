// `zt train --max-restarts` end to end: ranks SIGKILLed at random moments
// of a real run, which restarts from its checkpoints and must end exactly
// where an uninterrupted run ends (the exported weights bitwise, every
// logged loss equal to the uninterrupted run's at that step); a failure
// before the first checkpoint stops the job unless --restart-from-scratch;
// restarts that run out exit with the last failure's code. Plus the step
// marker the restart lines read (train/job/step_marker.h).
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/testing/background_shell.h"
#include "tests/testing/scratch_dir.h"
#include "train/job/step_marker.h"

namespace zt::train {
namespace {

using Clock = std::chrono::steady_clock;
using zt::testing::ReadFileBytes;
using zt::testing::ScratchDir;

// A `zt train` started in the background, its stdout+stderr in `log`.
struct Job {
  pid_t pid = -1;
  std::string log;
};

Job StartZt(const std::string& args, const std::string& log) {
  Job job;
  job.log = log;
  job.pid = zt::testing::StartShell(
      absl::StrCat("exec env OMP_NUM_THREADS=1 ", ZT_BINARY_DIR, "/bin/zt ", args, " > ", log, " 2>&1"));
  return job;
}

// The exit code, or -1 while it runs; 128 + signal for a signal.
int Poll(const Job& job, bool wait) {
  return zt::testing::WaitShell(job.pid, wait ? std::nullopt : std::optional(std::chrono::milliseconds(0)));
}

// The processes whose parent is `parent` (zt train's ranks).
std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> kids;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return kids;
  while (dirent* e = ::readdir(d)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    const std::string stat = ReadFileBytes(absl::StrCat("/proc/", pid, "/stat"));
    const size_t close = stat.rfind(')');  // the command name may hold spaces
    if (close == std::string::npos) continue;
    std::vector<std::string> f = absl::StrSplit(stat.substr(close + 2), ' ');
    pid_t ppid = 0;
    if (f.size() > 1 && absl::SimpleAtoi(f[1], &ppid) && ppid == parent && f[0] != "Z") kids.push_back(pid);
  }
  ::closedir(d);
  std::sort(kids.begin(), kids.end());
  return kids;
}

// The highest step rank 0 logged ("[zt r0 INFO] step N |"), 0 if none.
int64_t LastLoggedStep(const std::string& log) {
  int64_t last = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    constexpr absl::string_view kTag = "[zt r0 INFO] step ";
    if (!absl::StartsWith(line, kTag)) continue;
    line.remove_prefix(kTag.size());
    int64_t n = 0;
    if (absl::SimpleAtoi(line.substr(0, line.find(' ')), &n)) last = n;
  }
  return last;
}

// Every row of a csv_monitor file, in order: (step, the value as written).
std::vector<std::pair<int64_t, std::string>> CsvRows(const std::string& path) {
  std::vector<std::pair<int64_t, std::string>> rows;
  bool header = true;
  for (absl::string_view line : absl::StrSplit(ReadFileBytes(path), '\n', absl::SkipEmpty())) {
    if (header) {
      header = false;
      continue;
    }
    std::vector<std::string> f = absl::StrSplit(line, ',');
    int64_t step = 0;
    if (f.size() == 2 && absl::SimpleAtoi(f[0], &step)) rows.emplace_back(step, f[1]);
  }
  return rows;
}

constexpr int kSteps = 300;
constexpr int kSaveInterval = 10;

// gpt2-mini at stage 3 on 2 ranks (micro-batch 4 keeps a step near 0.1 s here).
std::string TrainArgs(const std::string& out, int steps, int save_interval) {
  return absl::StrCat(
      "train --model gpt2-mini --stage 3 --nproc 2 --micro-batch 4 --steps ", steps, " --save-interval ", save_interval,
      " --seed 11 --eval-interval -1 --report none --no-progress --set steps_per_print=1 --output-dir ", out);
}

TEST(StepMarker, RecordsTheLastStepInPlace) {
  ScratchDir dir("zt_step_marker");
  EXPECT_EQ(ReadLastStep(dir.path()), std::nullopt);
  absl::StatusOr<StepMarker> m = StepMarker::Open(dir.path());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(m->Record(123456).ok());
  EXPECT_EQ(ReadLastStep(dir.path()), 123456);
  ASSERT_TRUE(m->Record(7).ok());  // shorter: no digits of the old value left behind
  EXPECT_EQ(ReadLastStep(dir.path()), 7);
  // A torn or foreign file reads as no record, never as a wrong step.
  std::ofstream(dir.File(kStepMarkerName)) << "step 12";
  EXPECT_EQ(ReadLastStep(dir.path()), std::nullopt);
  std::ofstream(dir.File(kStepMarkerName)) << "garbage garbage garbage\n";
  EXPECT_EQ(ReadLastStep(dir.path()), std::nullopt);
  EXPECT_FALSE(StepMarker::Open(dir.File("missing/dir")).ok());
  // A new job's first attempt starts the record afresh.
  ASSERT_TRUE(StepMarker::Open(dir.path(), /*truncate=*/true).ok());
  EXPECT_EQ(ReadLastStep(dir.path()), std::nullopt);
}

// The campaign: 300 steps, a checkpoint every 10, a rank SIGKILLed
// at 10 random moments (each after a random step of the current attempt, at
// a random point within that step: in the forward, the collectives, a save
// or the start-up of the next attempt).
TEST(Restarts, TenRandomKillsEndBitwiseWhereAnUninterruptedRunEnds) {
  ScratchDir dir("zt_restart");
  const Job ref = StartZt(TrainArgs(dir.File("ref"), kSteps, kSaveInterval), dir.File("ref.log"));
  ASSERT_GT(ref.pid, 0);
  ASSERT_EQ(Poll(ref, true), 0) << ReadFileBytes(ref.log);

  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  SCOPED_TRACE(absl::StrCat("kill moments drawn with seed ", seed));
  constexpr int kKills = 10;
  std::vector<int64_t> at(kKills);
  for (int64_t& s : at) s = std::uniform_int_distribution<int64_t>(kSaveInterval + 1, kSteps - 15)(rng);
  std::sort(at.begin(), at.end());

  const Job job = StartZt(absl::StrCat(TrainArgs(dir.File("run"), kSteps, kSaveInterval), " --max-restarts 20"),
                          dir.File("run.log"));
  ASSERT_GT(job.pid, 0);
  const auto deadline = Clock::now() + std::chrono::minutes(8);
  int kills = 0;
  std::vector<double> recover_sec;  // a kill to the next attempt's first new step
  int code = -1;
  while (code == -1 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    code = Poll(job, false);
    if (kills == kKills || code != -1) continue;
    if (LastLoggedStep(ReadFileBytes(job.log)) < at[static_cast<size_t>(kills)]) continue;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 150)(rng)));
    const std::vector<pid_t> ranks = ChildrenOf(job.pid);
    if (ranks.empty()) continue;  // between attempts
    const pid_t victim = ranks[std::uniform_int_distribution<size_t>(0, ranks.size() - 1)(rng)];
    if (::kill(victim, SIGKILL) != 0) continue;
    ++kills;
    // Time the recovery: until the log shows a step logged after the kill.
    const auto killed = Clock::now();
    const size_t mark = ReadFileBytes(job.log).size();
    while (Clock::now() < deadline && Poll(job, false) == -1) {
      const std::string tail = ReadFileBytes(job.log).substr(mark);
      if (absl::StrContains(tail, "restart ") && absl::StrContains(tail, "lost") &&
          LastLoggedStep(tail.substr(tail.rfind("lost"))) > 0) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    recover_sec.push_back(std::chrono::duration<double>(Clock::now() - killed).count());
  }
  if (code == -1) {
    ::kill(job.pid, SIGKILL);
    Poll(job, true);
    FAIL() << "the restarted run did not finish in 8 minutes:\n" << ReadFileBytes(job.log);
  }
  const std::string log = ReadFileBytes(job.log);
  ASSERT_EQ(code, 0) << log;
  ASSERT_EQ(kills, kKills) << log;

  // One launcher line per restart, and each attempt says where it resumed
  // and what the failure cost (at most the save interval).
  int lost_total = 0, restarts = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StartsWith(line, "zt train: restart ") && absl::StrContains(line, " of 20 after ")) ++restarts;
    const size_t lost = line.find(" steps lost");
    if (!absl::StartsWith(line, "zt train: restart ") || lost == std::string::npos) continue;
    const size_t colon = line.rfind(": ", lost);
    int n = -1;
    ASSERT_TRUE(absl::SimpleAtoi(line.substr(colon + 2, lost - colon - 2), &n)) << line;
    EXPECT_GE(n, 0) << line;
    EXPECT_LE(n, kSaveInterval) << line;
    lost_total += n;
  }
  EXPECT_EQ(restarts, kKills) << log;

  // Bitwise the same end, and every loss logged (the repeated steps after
  // each resume too) equal to the uninterrupted run's at that step.
  const std::string ref_weights = ReadFileBytes(dir.File("ref/model.safetensors"));
  ASSERT_GT(ref_weights.size(), 1000u);
  EXPECT_TRUE(ReadFileBytes(dir.File("run/model.safetensors")) == ref_weights) << "the exports differ";
  std::map<int64_t, std::string> want;
  for (const auto& [step, value] : CsvRows(dir.File("ref/gpt2-mini/Train_Samples_train_loss.csv"))) want[step] = value;
  ASSERT_EQ(want.size(), static_cast<size_t>(kSteps));
  const auto got = CsvRows(dir.File("run/gpt2-mini/Train_Samples_train_loss.csv"));
  std::map<int64_t, int> seen;
  for (const auto& [step, value] : got) {
    EXPECT_EQ(value, want[step]) << "step " << step;
    ++seen[step];
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kSteps));
  EXPECT_EQ(got.size(), static_cast<size_t>(kSteps + lost_total)) << "every lost step is logged again once";
  double mean = 0;
  for (double s : recover_sec) mean += s / static_cast<double>(recover_sec.size());
  std::printf(
      "restarts: %d kills, %d steps lost in all (%.1f per failure), %.2f s from a kill to the next new step "
      "on average (max %.2f)\n",
      kills, lost_total, static_cast<double>(lost_total) / kills, mean,
      *std::max_element(recover_sec.begin(), recover_sec.end()));
}

// checkpoint.async_save under failures: a rank SIGKILLed while a background
// write is in flight, 20 times. `latest` moves only once every rank's files
// are complete, so each restart resumes from a whole, verified checkpoint
// (the load checks every record's CRC), and the run still ends bitwise where
// an uninterrupted run with synchronous saves ends.
TEST(Restarts, KillsDuringBackgroundWritesAlwaysResumeFromACompleteCheckpoint) {
  ScratchDir dir("zt_restart_async");
  // 2.6M parameters (~42 MB of checkpoint per save): writes that last
  // several steps.
  const std::string model =
      "train --model gpt2 --model-set n_layer=4 --model-set n_embd=192 --model-set n_head=4 --model-set vocab=4096 "
      "--model-set seq_len=64 --seq-len 64 --micro-batch 2 --stage 3 --nproc 2 --steps 100 --save-interval 4 --seed 5 "
      "--eval-interval -1 --report none --no-progress --set steps_per_print=1 --output-dir ";
  const Job ref = StartZt(model + dir.File("ref"), dir.File("ref.log"));
  ASSERT_GT(ref.pid, 0);
  ASSERT_EQ(Poll(ref, true), 0) << ReadFileBytes(ref.log);

  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  SCOPED_TRACE(absl::StrCat("kill delays drawn with seed ", seed));
  const Job job = StartZt(absl::StrCat(model, dir.File("run"), " --set checkpoint.async_save=true --max-restarts 30"),
                          dir.File("run.log"));
  ASSERT_GT(job.pid, 0);
  constexpr int kKills = 20;
  int kills = 0;
  const auto deadline = Clock::now() + std::chrono::minutes(8);
  int code = -1;
  size_t scanned = 0;  // the log up to here has been looked at
  while (code == -1 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    code = Poll(job, false);
    if (kills == kKills || code != -1) continue;
    // A background write in flight: its "staged" line, and no "written" line
    // for it yet; not before the first save is published (a restart needs one).
    const std::string log = ReadFileBytes(job.log);
    if (log.find("written in the background") == std::string::npos) continue;
    const size_t staged = log.find("copying and writing in the background", scanned);
    if (staged == std::string::npos) continue;
    const size_t open = log.rfind("checkpoint '", staged);
    const std::string folder = log.substr(open + 12, log.find('\'', open + 12) - open - 12);
    if (absl::StrContains(log.substr(staged), absl::StrCat("checkpoint '", folder, "' written"))) {
      scanned = staged + 1;  // finished before we looked: wait for the next one
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 40)(rng)));
    const std::vector<pid_t> ranks = ChildrenOf(job.pid);
    if (ranks.empty()) continue;
    const std::string before = ReadFileBytes(job.log);
    if (absl::StrContains(before.substr(staged), absl::StrCat("checkpoint '", folder, "' written"))) {
      scanned = staged + 1;
      continue;
    }
    if (::kill(ranks[std::uniform_int_distribution<size_t>(0, ranks.size() - 1)(rng)], SIGKILL) != 0) continue;
    ++kills;
    scanned = before.size();
  }
  if (code == -1) {
    ::kill(job.pid, SIGKILL);
    Poll(job, true);
    FAIL() << "the run did not finish in 8 minutes:\n" << ReadFileBytes(job.log);
  }
  const std::string log = ReadFileBytes(job.log);
  ASSERT_EQ(code, 0) << log;
  ASSERT_EQ(kills, kKills) << log;
  int resumes = 0, writes = 0;
  std::vector<double> write_sec;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    resumes += absl::StrContains(line, "resumed at step");
    const size_t in = line.find("written in the background in ");
    double sec = 0;
    if (in != absl::string_view::npos &&
        absl::SimpleAtod(line.substr(in + 29, line.find(" s", in + 29) - in - 29), &sec)) {
      ++writes;
      write_sec.push_back(sec);
    }
  }
  EXPECT_EQ(resumes, kKills) << log;
  std::sort(write_sec.begin(), write_sec.end());
  std::printf(
      "async restarts: %d kills while a save was staged but not yet committed; %d saves committed, their "
      "background writes took %.2f s (median)\n",
      kills, writes, write_sec.empty() ? 0.0 : write_sec[write_sec.size() / 2]);
  // Every tag left in the save dir is whole (the interrupted ones were
  // saved again later), and the end is the synchronous run's, bitwise.
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir.File("run/checkpoints"), ec)) {
    if (!e.is_directory()) continue;
    const std::string tag = e.path().filename().string();
    const std::string verify = absl::StrCat(ZT_BINARY_DIR, "/bin/zt ckpt inspect ", dir.File("run/checkpoints"),
                                            " --tag ", tag, " --verify > /dev/null 2>&1");
    EXPECT_EQ(std::system(verify.c_str()), 0) << tag << " does not verify";
  }
  const std::string ref_weights = ReadFileBytes(dir.File("ref/model.safetensors"));
  ASSERT_GT(ref_weights.size(), 1000u);
  EXPECT_TRUE(ReadFileBytes(dir.File("run/model.safetensors")) == ref_weights) << "the exports differ";
}

// Kills rank 1 once rank 0 has logged `step`; false if the job ended first.
bool KillAtStep(const Job& job, int64_t step) {
  const auto deadline = Clock::now() + std::chrono::minutes(3);
  while (Clock::now() < deadline && Poll(job, false) == -1) {
    if (LastLoggedStep(ReadFileBytes(job.log)) >= step) {
      const std::vector<pid_t> ranks = ChildrenOf(job.pid);
      if (!ranks.empty()) return ::kill(ranks.back(), SIGKILL) == 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// A failure before the first checkpoint: redoing the work from step 0 is the
// user's call (--restart-from-scratch); without it the restart stops the job
// with exit 2 and says what to change, instead of retrying 20 times.
TEST(Restarts, AFailureBeforeTheFirstCheckpointNeedsRestartFromScratch) {
  ScratchDir dir("zt_restart_scratch");
  const Job refused = StartZt(absl::StrCat(TrainArgs(dir.File("a"), 60, 0), " --max-restarts 20"), dir.File("a.log"));
  ASSERT_TRUE(KillAtStep(refused, 5)) << ReadFileBytes(refused.log);
  EXPECT_EQ(Poll(refused, true), 2) << ReadFileBytes(refused.log);
  const std::string a = ReadFileBytes(refused.log);
  EXPECT_TRUE(absl::StrContains(a, "restart 1: no checkpoint at")) << a;
  EXPECT_TRUE(absl::StrContains(a, "--restart-from-scratch")) << a;
  EXPECT_TRUE(absl::StrContains(a, "not restarting after 1 restart")) << a;
  EXPECT_FALSE(absl::StrContains(a, "restart 2 of 20")) << a;

  const Job allowed = StartZt(
      absl::StrCat(TrainArgs(dir.File("b"), 60, 0), " --max-restarts 20 --restart-from-scratch"), dir.File("b.log"));
  ASSERT_TRUE(KillAtStep(allowed, 5)) << ReadFileBytes(allowed.log);
  EXPECT_EQ(Poll(allowed, true), 0) << ReadFileBytes(allowed.log);
  const std::string b = ReadFileBytes(allowed.log);
  EXPECT_TRUE(absl::StrContains(b, "restart 1: training again from step 0; the failed attempt reached step")) << b;
  EXPECT_EQ(LastLoggedStep(b), 60) << b;
}

// Restarts that run out: the job exits with the last failure's code (SIGKILL's).
TEST(Restarts, WhenTheRestartsRunOutTheLastFailureIsTheExitCode) {
  ScratchDir dir("zt_restart_out");
  const Job job = StartZt(absl::StrCat(TrainArgs(dir.File("a"), 200, 5), " --max-restarts 1"), dir.File("a.log"));
  ASSERT_TRUE(KillAtStep(job, 8)) << ReadFileBytes(job.log);
  // The second attempt resumes at 5; kill it after it has passed its resume point.
  const auto deadline = Clock::now() + std::chrono::minutes(3);
  while (Clock::now() < deadline && !absl::StrContains(ReadFileBytes(job.log), "steps lost")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(KillAtStep(job, 20)) << ReadFileBytes(job.log);
  EXPECT_EQ(Poll(job, true), 128 + SIGKILL) << ReadFileBytes(job.log);
  const std::string log = ReadFileBytes(job.log);
  EXPECT_TRUE(absl::StrContains(log, "zt train: restart 1 of 1 after")) << log;
  EXPECT_TRUE(absl::StrContains(log, "zt train: all 1 restarts used (--max-restarts); the last attempt failed: rank"))
      << log;
}

// Flags that cannot work are refused before any rank starts.
TEST(Restarts, CheckpointsOffNeedRestartFromScratch) {
  ScratchDir dir("zt_restart_flags");
  const Job job =
      StartZt(absl::StrCat(TrainArgs(dir.File("a"), 10, 0), " --max-restarts 3 --save-dir none"), dir.File("a.log"));
  EXPECT_EQ(Poll(job, true), 2);
  EXPECT_TRUE(absl::StrContains(ReadFileBytes(job.log), "--max-restarts resumes each restart from a checkpoint"))
      << ReadFileBytes(job.log);
}

// --memory-copies: a restart reads the checkpoint from the ranks' memory
// copies (/dev/shm). Both ranks are frozen (SIGSTOP) once the save at step
// 20 has been committed, the files of the tag `latest` names are removed
// from the disk, one rank is SIGKILLed and the other let go: the restart
// must load from memory alone and end bitwise where an uninterrupted run
// ends. Then the same with the memory copies removed instead: it loads from
// the disk. Neither job leaves its memory folder behind. Flags: without
// --max-restarts the copies serve nothing and are refused.
TEST(Restarts, MemoryCopiesServeARestartWithoutTheDisk) {
  namespace fs = std::filesystem;
  ScratchDir dir("zt_restart_memory");
  constexpr int kShort = 40;
  const Job ref = StartZt(TrainArgs(dir.File("ref"), kShort, kSaveInterval), dir.File("ref.log"));
  ASSERT_EQ(Poll(ref, true), 0) << ReadFileBytes(ref.log);
  const std::string ref_weights = ReadFileBytes(dir.File("ref/model.safetensors"));
  ASSERT_GT(ref_weights.size(), 1000u);
  for (const bool disk_gone : {true, false}) {
    SCOPED_TRACE(disk_gone ? "the disk's files removed" : "the memory copies removed");
    const std::string out = dir.File(disk_gone ? "memory" : "disk");
    const Job job =
        StartZt(absl::StrCat(TrainArgs(out, kShort, kSaveInterval), " --max-restarts 2 --memory-copies"), out + ".log");
    ASSERT_GT(job.pid, 0);
    const auto deadline = Clock::now() + std::chrono::minutes(3);
    while (Clock::now() < deadline && Poll(job, false) == -1 && LastLoggedStep(ReadFileBytes(job.log)) < 25) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    // The launcher's memory folder: /dev/shm/zt-copies-<its pid>-<random>-node0.
    std::string copies;
    for (const auto& e : fs::directory_iterator("/dev/shm")) {
      const std::string name = e.path().filename().string();
      if (absl::StartsWith(name, absl::StrCat("zt-copies-", job.pid, "-")) && absl::EndsWith(name, "-node0")) {
        copies = e.path().string();
      }
    }
    ASSERT_FALSE(copies.empty()) << "no memory folder of zt train (pid " << job.pid << ") in /dev/shm";
    const std::vector<pid_t> ranks = ChildrenOf(job.pid);
    ASSERT_EQ(ranks.size(), 2u) << ReadFileBytes(job.log);
    // Frozen where both ranks' copies of the tag `latest` names are made
    // (they are made in the background after each save's commit).
    std::string tag;
    for (int tries = 0; tries < 200; ++tries) {
      for (pid_t p : ranks) ASSERT_EQ(::kill(p, SIGSTOP), 0);
      tag = std::string(absl::StripAsciiWhitespace(ReadFileBytes(out + "/checkpoints/latest")));
      bool both = !tag.empty();
      for (int r : {0, 1}) {
        both = both && absl::StrContains(ReadFileBytes(absl::StrCat(copies, "/rank", r, "/current/manifest")),
                                         absl::StrCat("tag ", tag, "\n"));
      }
      if (both) break;
      for (pid_t p : ranks) ::kill(p, SIGCONT);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      tag.clear();
    }
    ASSERT_FALSE(tag.empty()) << "no moment with both ranks' copies of `latest` made:\n" << ReadFileBytes(job.log);
    const std::string folder = out + "/checkpoints/" + tag;
    int removed = 0;
    if (disk_gone) {
      for (const auto& e : fs::directory_iterator(folder)) removed += static_cast<int>(fs::remove_all(e.path()));
    } else {
      for (const auto& e : fs::directory_iterator(copies)) {
        if (absl::StartsWith(e.path().filename().string(), "rank"))
          removed += static_cast<int>(fs::remove_all(e.path()));
      }
    }
    EXPECT_GE(removed, 4);
    ASSERT_EQ(::kill(ranks.back(), SIGKILL), 0);
    ASSERT_EQ(::kill(ranks.front(), SIGCONT), 0);
    const int code = Poll(job, true);
    const std::string log = ReadFileBytes(job.log);
    ASSERT_EQ(code, 0) << log;
    EXPECT_TRUE(absl::StrContains(log, "zt train: restart 1 of 2 after")) << log;
    EXPECT_TRUE(absl::StrContains(log, absl::StrCat("checkpoint '", out, "/checkpoints/", tag, "': ",
                                                    disk_gone ? "4 of 4 files read from memory copies, 0 from disk"
                                                              : "0 of 4 files read from memory copies, 4 from disk")))
        << log;
    EXPECT_FALSE(fs::exists(copies)) << "the job's memory folder outlived it";
    EXPECT_TRUE(ReadFileBytes(out + "/model.safetensors") == ref_weights) << "the exports differ";
  }
  const Job refused = StartZt(absl::StrCat(TrainArgs(dir.File("x"), 10, 5), " --memory-copies"), dir.File("x.log"));
  EXPECT_EQ(Poll(refused, true), 2);
  EXPECT_TRUE(absl::StrContains(ReadFileBytes(refused.log), "--memory-copies serves restarts"))
      << ReadFileBytes(refused.log);
}

}  // namespace
}  // namespace zt::train
