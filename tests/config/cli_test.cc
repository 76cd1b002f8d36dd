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
  CommandResult r = Zt("config check --print --world-size 2 --hidden-size 256 --auto optimizer.params.lr=2e-5 " + file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("note: optimizer.params.lr: \"auto\" -> 2e-05 (given)"), std::string::npos) << r.err;
  ParseResult printed = testing::Parse(r.out, 2);
  ASSERT_TRUE(printed.config) << testing::ErrorsText(printed) << r.out;
  EXPECT_DOUBLE_EQ(printed.config->optimizer.lr, 2e-5);

  ParseResult original = testing::Parse(testing::ReadFile(file), 2, {{"optimizer.params.lr", "2e-5"}}, 256);
  ASSERT_TRUE(original.config) << testing::ErrorsText(original);
  EXPECT_TRUE(ConfigsEqual(*original.config, *printed.config))
      << ::testing::PrintToString(ConfigDifferences(*original.config, *printed.config));
}

// Hugging Face's published "auto" configs check as valid before the run:
// what only the run knows (the number of training steps; the ZeRO sizes from
// the model's hidden size) gets one note per key naming what fills it.
// hf_zero{2,3}_warmupdecay_auto.json are HF's ds_config_zero{2,3}.json
// (hf_zero{2,3}_auto.json) with the WarmupDecayLR block of transformers'
// DeepSpeed guide (docs/source/en/deepspeed.md, "Optimizer and scheduler").
TEST(ZtConfigCheck, HuggingFaceAutoConfigsLeaveRunTimeValuesToTheRun) {
  const std::string data = ZT_SOURCE_DIR "/tests/config/data/";
  const std::vector<std::string> total = {"scheduler.params.total_num_steps"};
  const std::vector<std::string> sizes = {"zero_optimization.reduce_bucket_size",
                                          "zero_optimization.stage3_prefetch_bucket_size",
                                          "zero_optimization.stage3_param_persistence_threshold"};
  struct Case {
    std::string file;
    std::vector<std::string> run_time;
  };
  std::vector<std::string> both = total;
  both.insert(both.end(), sizes.begin(), sizes.end());
  for (const Case& c : std::vector<Case>{{"hf_zero2_auto.json", {}},
                                         {"hf_zero2_warmupdecay_auto.json", total},
                                         {"hf_zero3_auto.json", sizes},
                                         {"hf_zero3_bf16_auto.json", sizes},
                                         {"hf_zero3_warmupdecay_auto.json", both},
                                         {"hf_zero3_nvme_auto.json", both}}) {
    SCOPED_TRACE(c.file);
    CommandResult r = Zt("config check --world-size 2 " + data + c.file);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(c.file + ": OK (ZeRO stage"), std::string::npos) << r.out;
    size_t notes = 0;
    for (size_t at = r.err.find("\"auto\" left to run time"); at != std::string::npos;
         at = r.err.find("\"auto\" left to run time", at + 1)) {
      ++notes;
    }
    EXPECT_EQ(notes, c.run_time.size()) << r.err;
    for (const std::string& key : c.run_time) {
      EXPECT_NE(r.err.find(c.file + ": note: " + key + ": \"auto\" left to run time: the Trainer fills it"),
                std::string::npos)
          << key << "\n"
          << r.err;
    }
    if (!c.run_time.empty()) {
      EXPECT_NE(r.out.find(std::to_string(c.run_time.size()) + " \"auto\" left to run time)"), std::string::npos)
          << r.out;
    }
    // The Trainer's defaults for the rest.
    EXPECT_NE(r.err.find("note: optimizer.params.lr: \"auto\" -> 5e-05 (the Hugging Face Trainer's default "
                         "learning_rate)"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("note: scheduler.params.warmup_num_steps: \"auto\" -> 0 (the Hugging Face Trainer's "
                         "default warmup_steps / warmup_ratio)"),
              std::string::npos)
        << r.err;
  }
  // Given on the command line, nothing is left.
  CommandResult given = Zt("config check --world-size 2 --hidden-size 64 --auto scheduler.params.total_num_steps=5 " +
                           data + "hf_zero3_warmupdecay_auto.json");
  EXPECT_EQ(given.exit_code, 0) << given.err;
  EXPECT_EQ(given.err.find("left to run time"), std::string::npos) << given.err;
  EXPECT_NE(given.err.find("note: zero_optimization.reduce_bucket_size: \"auto\" -> 4096 (hidden_size * "
                           "hidden_size with hidden_size 64)"),
            std::string::npos)
      << given.err;
  EXPECT_NE(given.err.find("note: scheduler.params.total_num_steps: \"auto\" -> 5 (given)"), std::string::npos)
      << given.err;
  CommandResult bad = Zt("config check --hidden-size 0 " + data + "hf_zero3_auto.json");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--hidden-size must be a positive integer"), std::string::npos) << bad.err;
}

// --print keeps what is left to run time as "auto", so the printed config
// checks to the same thing.
TEST(ZtConfigCheck, PrintKeepsRunTimeValuesAuto) {
  const std::string file = ZT_SOURCE_DIR "/tests/config/data/hf_zero3_warmupdecay_auto.json";
  CommandResult r = Zt("config check --print --world-size 2 " + file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"total_num_steps\": \"auto\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"reduce_bucket_size\": \"auto\""), std::string::npos) << r.out;
  const std::string printed = WriteTemp("printed_auto.json", r.out);
  CommandResult again = Zt("config check --world-size 2 " + printed);
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("4 \"auto\" left to run time)"), std::string::npos) << again.out;
  std::remove(printed.c_str());
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
