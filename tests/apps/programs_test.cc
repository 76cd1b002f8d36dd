// The two programs behind `zt` (cli/programs.h): the front links no
// LibTorch and runs ckpt/config/estimate/tokenize/launch itself, and checks
// a `zt train` job (cli/train_job.h); train and `launch -- zt train` run in
// zt-torch, found beside zt or at its installed place, with `zt train` ranks
// still forked there.
#include "cli/programs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "tests/testing/zt_command.h"

namespace zt::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kBin = ZT_BINARY_DIR "/bin";

using zt::testing::RunShell;
using ShellRun = zt::testing::ZtRun;

// A fresh folder under the test's temporary directory.
fs::path TempDir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("zt_programs_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(Programs, TheFrontLinksNoLibTorchAndZtTorchDoes) {
  // What the dynamic loader would map (ldd's own mechanism).
  const ShellRun front = RunShell("LD_TRACE_LOADED_OBJECTS=1 " + kBin + "/zt");
  ASSERT_EQ(front.code, 0) << front.output;
  EXPECT_THAT(front.output, HasSubstr("libc.so"));
  EXPECT_THAT(front.output, Not(HasSubstr("libtorch")));
  EXPECT_THAT(front.output, Not(HasSubstr("libc10")));
  const ShellRun torch = RunShell("LD_TRACE_LOADED_OBJECTS=1 " + kBin + "/zt-torch");
  ASSERT_EQ(torch.code, 0) << torch.output;
  EXPECT_THAT(torch.output, HasSubstr("libtorch"));
}

TEST(Programs, WithoutZtTorchTheFrontRunsItsOwnCommandsAndNamesWhatIsMissing) {
  const fs::path dir = TempDir("alone");
  fs::copy_file(kBin + "/zt", dir / "zt");
  const std::string zt = (dir / "zt").string();
  for (const char* own : {"ckpt --help", "config --help", "tokenize --help", "launch --help",
                          "estimate --model gpt2-tiny", "--help", "--version"}) {
    const ShellRun r = RunShell(zt + " " + own);
    EXPECT_EQ(r.code, 0) << own << ": " << r.output;
  }
  const ShellRun version = RunShell(zt + " --version");
  EXPECT_THAT(version.output, HasSubstr("zt (zerotorch) 0."));
  EXPECT_THAT(version.output, HasSubstr("DeepSpeed checkpoint format 0.14.5"));
  const ShellRun launched = RunShell(zt + " launch --nproc-per-node 2 -- /bin/echo hello");
  EXPECT_EQ(launched.code, 0) << launched.output;
  EXPECT_THAT(launched.output, HasSubstr("[rank 1] hello"));
  // `zt train` reads and checks its job here: help and bad input need no zt-torch.
  const ShellRun help = RunShell(zt + " train --help");
  EXPECT_EQ(help.code, 0) << help.output;
  EXPECT_THAT(help.output, HasSubstr("usage: zt train"));
  for (const auto& [args, expect] : std::vector<std::pair<std::string, std::string>>{
           {"--model gpt3", "unknown model 'gpt3'"},
           {"--stage 5", "--stage must be 0, 1, 2 or 3"},
           {"--model gpt2-tiny --data " + (dir / "missing.txt").string(), (dir / "missing.txt").string()},
           {"--model gpt2-tiny --model-set n_head=5", "n_head"},
           {"--no-such-flag", "--no-such-flag"}}) {
    const ShellRun bad = RunShell(zt + " train --output-dir " + (dir / "out").string() + " " + args);
    EXPECT_EQ(bad.code, 2) << args << ": " << bad.output;
    EXPECT_THAT(bad.output, HasSubstr(expect)) << args;
    EXPECT_THAT(bad.output, Not(HasSubstr("zt-torch"))) << args;
  }
  // A job that passes the checks runs in zt-torch, and the front names where it looked.
  const ShellRun delegated = RunShell(zt + " train --model gpt2-tiny --steps 1 --output-dir " + (dir / "out").string());
  EXPECT_EQ(delegated.code, 127) << delegated.output;
  EXPECT_THAT(delegated.output, HasSubstr("cannot find zt-torch"));
  EXPECT_THAT(delegated.output, HasSubstr((dir / "zt-torch").string()));
  EXPECT_THAT(delegated.output, HasSubstr("libexec/zerotorch/zt-torch"));
  // `zt launch -- zt train` needs zt-torch too, and says so before starting any rank.
  const ShellRun train = RunShell(zt + " launch --nproc-per-node 2 -- " + zt + " train --steps 1");
  EXPECT_EQ(train.code, 127) << train.output;
  EXPECT_THAT(train.output, HasSubstr("cannot find zt-torch"));
}

TEST(Programs, DelegatedCommandsKeepArgvAndExitCodes) {
  // Passes the front's checks; zt-torch's own (fp16 needs CUDA) refuses it.
  const fs::path dir = TempDir("delegated");
  const ShellRun fp16 =
      RunShell(kBin + "/zt train --model gpt2-tiny --precision fp16 --output-dir " + (dir / "out").string());
  EXPECT_EQ(fp16.code, 2) << fp16.output;
  EXPECT_THAT(fp16.output, HasSubstr("fp16 compute needs CUDA"));
  // The notes on "auto" values are printed once, by the front.
  size_t notes = 0;
  for (size_t at = 0; (at = fp16.output.find("total_num_steps", at)) != std::string::npos; ++at) ++notes;
  EXPECT_EQ(notes, 1u) << fp16.output;
  const ShellRun direct = RunShell(kBin + "/zt-torch ckpt --help");
  EXPECT_EQ(direct.code, 2) << direct.output;
  EXPECT_THAT(direct.output, HasSubstr("run `zt ckpt` instead"));
}

// The installed layout, <prefix>/bin/zt and <prefix>/libexec/zerotorch/zt-torch
// (cmake/ZtInstall.cmake): zt finds zt-torch there, and zt-torch's launcher
// counts <prefix>/bin/zt as its own program, so `zt train` ranks are forked
// (ZT_FORK_RANKS=always makes an exec an error).
TEST(Programs, InstalledLayoutFindsZtTorchAndForksTrainRanks) {
  const fs::path prefix = TempDir("prefix");
  fs::create_directories(prefix / "bin");
  fs::create_directories(prefix / "libexec/zerotorch");
  fs::copy_file(kBin + "/zt", prefix / "bin/zt");
  fs::copy_file(kBin + "/zt-torch", prefix / "libexec/zerotorch/zt-torch");
  const std::string zt = (prefix / "bin/zt").string();
  const ShellRun help = RunShell(zt + " train --help");
  EXPECT_EQ(help.code, 0) << help.output;
  EXPECT_THAT(help.output, HasSubstr("usage: zt train"));
  const ShellRun launched =
      RunShell("ZT_FORK_RANKS=always " + zt + " launch --nproc-per-node 2 -- " + zt + " train --help");
  EXPECT_EQ(launched.code, 0) << launched.output;
  EXPECT_THAT(launched.output, HasSubstr("[rank 1] usage: zt train"));
  // Other commands stay with the front's launcher, which execs every rank
  // (ZT_FORK_RANKS concerns `zt train` ranks only).
  const ShellRun other =
      RunShell("ZT_FORK_RANKS=always " + zt + " launch --nproc-per-node 1 -- " + zt + " config --help");
  EXPECT_EQ(other.code, 0) << other.output;
  EXPECT_THAT(other.output, HasSubstr("[rank 0] usage: zt config"));
}

}  // namespace
}  // namespace zt::cli
