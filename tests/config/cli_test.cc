// `zt config` as users run it: exit codes 0/2, the OK line, errors on
// stderr, --print output that re-parses, and the reference subcommand.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "tests/config/config_test_util.h"

namespace zt {
namespace {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs the built zt binary with `args` (shell-quoted by the caller).
CommandResult Zt(const std::string& args, const std::string& env = "") {
  const std::string dir = ::testing::TempDir();
  // Per process: ctest runs this binary's cases side by side.
  const std::string tag = std::to_string(::getpid());
  const std::string out = dir + "/zt_cli_out_" + tag + ".txt", err = dir + "/zt_cli_err_" + tag + ".txt";
  const std::string command = env + " " ZT_BINARY_DIR "/bin/zt " + args + " >" + out + " 2>" + err;
  int status = std::system(command.c_str());
  CommandResult run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = testing::ReadFile(out);
  run.err = testing::ReadFile(err);
  std::remove(out.c_str());
  std::remove(err.c_str());
  return run;
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + std::to_string(::getpid()) + "_" + name;
  std::ofstream(path) << text;
  return path;
}

const std::string kConfigs = ZT_SOURCE_DIR "/configs/";

TEST(ZtConfigCheck, ValidFilesPrintOkLinesAndExitZero) {
  CommandResult r =
      Zt("config check " + kConfigs + "zero2_bf16.json " + kConfigs + "zero3_offload_cpu.json --world-size 2");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("zero2_bf16.json: OK (ZeRO stage 2, bf16, AdamW + WarmupLR, train_batch_size 16 = micro 8 * "
                       "gas 1 * world 2)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("zero3_offload_cpu.json: OK (ZeRO stage 3"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");
}

TEST(ZtConfigCheck, WorldSizeDefaultsToTheEnvironment) {
  CommandResult r = Zt("config check " + kConfigs + "zero1.json", "WORLD_SIZE=4");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("* world 4)"), std::string::npos) << r.out;
  CommandResult bad = Zt("config check " + kConfigs + "zero1.json", "WORLD_SIZE=four");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("WORLD_SIZE='four'"), std::string::npos) << bad.err;
}

TEST(ZtConfigCheck, InvalidFileListsEveryErrorOnStderrAndExitsTwo) {
  const std::string path = WriteTemp("cli_bad.json", R"({
    "train_batch_size": 30, "train_micro_batch_size_per_gpu": 4,
    "zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}, "reduce_bucket_sise": 5e8},
    "fp16": {"enabled": true, "hysteresis": 0}
  })");
  CommandResult r = Zt("config check " + path + " " + kConfigs + "zero0.json --world-size 2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("zero0.json: OK"), std::string::npos) << "valid files are still checked: " << r.out;
  for (const std::string& line :
       {path + ": train_batch_size: train_batch_size 30 is not divisible by train_micro_batch_size_per_gpu 4 * "
               "world size 2 (= 8)",
        path + ": zero_optimization.reduce_bucket_sise: unknown key (did you mean \"reduce_bucket_size\"?)",
        path + ": zero_optimization.offload_param.device: parameter offload needs ZeRO stage 3",
        path + ": fp16.hysteresis: must be >= 1, got 0"}) {
    EXPECT_NE(r.err.find(line), std::string::npos) << "missing: " << line << "\nstderr:\n" << r.err;
  }
  std::remove(path.c_str());
}

TEST(ZtConfigCheck, PrintOutputReparsesToTheSameConfig) {
  const std::string file = ZT_SOURCE_DIR "/tests/config/data/hf_zero3_auto.json";
  CommandResult r = Zt("config check --print --world-size 2 --auto optimizer.params.lr=2e-5 " + file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("note: optimizer.params.lr: \"auto\" -> 2e-05 (given)"), std::string::npos) << r.err;
  ParseResult printed = testing::Parse(r.out, 2);
  ASSERT_TRUE(printed.config) << testing::ErrorsText(printed) << r.out;
  EXPECT_DOUBLE_EQ(printed.config->optimizer.lr, 2e-5);

  ParseResult original = testing::Parse(testing::ReadFile(file), 2, {{"optimizer.params.lr", "2e-5"}});
  ASSERT_TRUE(original.config) << testing::ErrorsText(original);
  EXPECT_TRUE(ConfigsEqual(*original.config, *printed.config))
      << ::testing::PrintToString(ConfigDifferences(*original.config, *printed.config));
}

TEST(ZtConfigCheck, UsageErrors) {
  CommandResult none = Zt("config check");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("give at least one config file"), std::string::npos);
  CommandResult flag = Zt("config check " + kConfigs + "zero1.json --wrold-size 2");
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_NE(flag.err.find("did you mean --world-size"), std::string::npos) << flag.err;
  CommandResult world = Zt("config check " + kConfigs + "zero1.json --world-size 0");
  EXPECT_EQ(world.exit_code, 2);
  CommandResult missing = Zt("config check /nonexistent.json");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("'/nonexistent.json' does not exist"), std::string::npos) << missing.err;
  CommandResult sub = Zt("config chek");
  EXPECT_EQ(sub.exit_code, 2);
  EXPECT_NE(sub.err.find("did you mean 'check'"), std::string::npos) << sub.err;
  CommandResult bad_auto = Zt("config check " + kConfigs + "zero1.json --auto lr");
  EXPECT_EQ(bad_auto.exit_code, 2);
  EXPECT_NE(bad_auto.err.find("--auto needs KEY=VALUE"), std::string::npos) << bad_auto.err;
}

TEST(ZtConfigCheck, HelpExitsZero) {
  for (const char* args : {"config --help", "config check --help", "config reference --help"}) {
    CommandResult r = Zt(args);
    EXPECT_EQ(r.exit_code, 0) << args;
    EXPECT_NE(r.out.find("usage: zt config"), std::string::npos) << args << ": " << r.out;
  }
}

TEST(ZtConfigReference, PrintsTheGeneratedReference) {
  CommandResult r = Zt("config reference");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, ConfigReferenceMarkdown());
}

}  // namespace
}  // namespace zt
