// `zt estimate` end to end: the table for a built-in model (all stages, one
// stage, offload, activations), the ZeRO paper lines, and errors that name
// the flag.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/testing/zt_command.h"

namespace {

using CommandResult = zt::testing::ZtRun;

CommandResult Zt(const std::string& args) { return zt::testing::RunZt("estimate " + args); }

TEST(EstimateCli, PrintsEveryStageSideBySide) {
  CommandResult r = Zt("--model gpt2-xl --world-size 8 --precision bf16 --micro-batch 1");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* s :
       {"stage 0", "stage 1", "stage 2", "stage 3", "params", "grads", "fp32 master", "optimizer state", "model states",
        "reduce buckets", "gathered (stage 3)", "activations", "total", "4Ψ + 12Ψ/N", "16Ψ/N", "8 ranks", "bf16"}) {
    EXPECT_TRUE(absl::StrContains(r.output, s)) << s << "\n" << r.output;
  }
}

// Bytes per step inside and across hosts, flat, hierarchical and hpZ: the
// lines the engine's counters were checked against (estimate_engine_test).
TEST(EstimateCli, BytesInsideAndAcrossHosts) {
  CommandResult r = Zt("--model gpt2-tiny --world-size 4 --ranks-per-host 2 --mics-shard-size 2 --stage 3");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* s : {"2 hosts of 2 ranks", "busiest host across", "stage 3, flat", "stage 3, mics_shard_size 2",
                        "N = 2 ranks sharing a shard"}) {
    EXPECT_TRUE(absl::StrContains(r.output, s)) << s << "\n" << r.output;
  }
  // gpt2-tiny's 124,672 fp32 elements: the replica all-reduce sends 244 KiB per rank, 487 KiB per host.
  const size_t mics = r.output.find("stage 3, mics_shard_size 2");
  ASSERT_NE(mics, std::string::npos);
  const std::string line = r.output.substr(mics, r.output.find('\n', mics) - mics);
  EXPECT_TRUE(absl::StrContains(line, "244 KiB") && absl::StrContains(line, "487 KiB")) << line;
  r = Zt("--model gpt2-tiny --world-size 4 --ranks-per-host 2 --hpz-partition-size 2 --stage 3");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "stage 3, hpZ 2")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "hpZ secondary")) << r.output;
  r = Zt("--model gpt2-tiny --world-size 4 --mics-shard-size 3");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(absl::StrContains(r.output, "--mics-shard-size must divide --world-size 4")) << r.output;
  r = Zt("--model gpt2-tiny --world-size 4 --mics-shard-size 2 --hpz-partition-size 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(absl::StrContains(r.output, "the engine runs one or the other")) << r.output;
  r = Zt("--model gpt2-tiny --world-size 4 --ranks-per-host 3");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(absl::StrContains(r.output, "--ranks-per-host must divide")) << r.output;
}

TEST(EstimateCli, OneStageWithOffload) {
  CommandResult r = Zt("--model llama-tiny --world-size 2 --stage 2 --offload cpu");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "stage 2")) << r.output;
  EXPECT_FALSE(absl::StrContains(r.output, "stage 1 ")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "offloaded to CPU")) << r.output;
  EXPECT_FALSE(absl::StrContains(r.output, "locked memory")) << "no swap buffers without NVMe\n" << r.output;
  r = Zt("--model llama-tiny --world-size 2 --stage 3 --offload nvme --offload-param nvme");
  ASSERT_EQ(r.code, 0) << r.output;
  // The swap buffers are locked memory once io_uring registers them.
  for (const char* s : {"swap buffers", "on NVMe", "offload nvme", "locked memory: the swap buffers are registered",
                        "per rank stage 3 ", "ulimit -l"}) {
    EXPECT_TRUE(absl::StrContains(r.output, s)) << s << "\n" << r.output;
  }
  r = Zt("--model llama-tiny --world-size 2 --offload-param disk");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(absl::StrContains(r.output, "--offload-param must be none, cpu or nvme")) << r.output;
}

TEST(EstimateCli, NvmeOffloadThatSavesNothingIsSaid) {
  // DeepSpeed's default sub_group_size (1e9 elements) puts a small model's
  // whole optimizer state in one sub-group: the swap buffers hold all of
  // it, and the estimate says so (the engine warns with the same rule).
  CommandResult r = Zt("--model mnist-cnn --world-size 2 --stage 2 --offload nvme");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "stage 2: NVMe offload of the optimizer state saves no host memory"))
      << r.output;
  // A sub-group a tenth of the state: the buffers hold less than the files.
  const std::string config = ::testing::TempDir() + "/zt_estimate_subgroup.json";
  {
    FILE* f = std::fopen(config.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2, "sub_group_size": 65536,
               "offload_optimizer": {"device": "nvme", "nvme_path": "/tmp"}}})",
               f);
    std::fclose(f);
  }
  r = Zt("--model mnist-cnn --world-size 2 --stage 2 --config " + config);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "offload nvme")) << r.output;
  EXPECT_FALSE(absl::StrContains(r.output, "saves no host memory")) << r.output;
}

TEST(EstimateCli, BareParameterCount) {
  CommandResult r = Zt("--params 7000000000 --world-size 64 --precision fp16");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "2Ψ + 14Ψ/N")) << r.output;
  // As users type it: the same estimate.
  for (const char* typed : {"7e9", "7.0B", "7000M"}) {
    CommandResult same = Zt(absl::StrCat("--params ", typed, " --world-size 64 --precision fp16"));
    ASSERT_EQ(same.code, 0) << typed << ": " << same.output;
    EXPECT_EQ(same.output, r.output) << typed;
  }
  CommandResult half = Zt("--params 7.5e9 --world-size 8");
  ASSERT_EQ(half.code, 0) << half.output;
  EXPECT_EQ(half.output, Zt("--params 7.5B --world-size 8").output);
  EXPECT_NE(half.output, Zt("--params 7e9 --world-size 8").output);
  CommandResult bad = Zt("--params 7.5 --world-size 8");
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(absl::StrContains(bad.output, "--params needs a whole parameter count")) << bad.output;
}

TEST(EstimateCli, ErrorsNameTheFlag) {
  CommandResult r = Zt("--model gpt2-tiny --world-size 0");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(absl::StrContains(r.output, "--world-size must be >= 1")) << r.output;
  r = Zt("--model gpt2-tiny --precision fp8");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(absl::StrContains(r.output, "--precision")) << r.output;
  r = Zt("--model no-such-model");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(absl::StrContains(r.output, "unknown model")) << r.output;
  r = Zt("--model gpt2-tiny --params 10");
  EXPECT_EQ(r.code, 2);
  r = Zt("--model gpt2-tiny --config /nonexistent/ds.json");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(absl::StrContains(r.output, "--config")) << r.output;
}

// zt train refuses, before any rank starts, a job whose model states alone
// exceed what the process may take (here a 3 GiB ulimit -v; a cgroup's
// limit is read the same way), rather than being killed for memory while
// building the model.
TEST(TrainSizing, AModelThatCannotFitIsRefusedUpFront) {
  const CommandResult r =
      zt::testing::RunShell("ulimit -v 3145728 && " ZT_BINARY_DIR "/bin/zt train --model gpt2-xl --nproc 1 --steps 1");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("--nproc 1 needs at least 1 rank x"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("left under this process's address-space limit (ulimit -v) of 3 GiB"), std::string::npos)
      << r.output;
}

// States that fit and activations that do not: one named message with what
// to change, not LibTorch's stack trace.
TEST(TrainSizing, ActivationsThatDoNotFitAreNamedWithWhatToChange) {
  const CommandResult r = zt::testing::RunShell(
      "ulimit -v 3145728 && OMP_NUM_THREADS=1 " ZT_BINARY_DIR
      "/bin/zt train --nproc 1 --steps 1 --micro-batch 2048 --save-dir none --output-dir \"$(mktemp -d)\"");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("can't allocate memory"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("out of memory while training"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Lower --micro-batch"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("frame #"), std::string::npos) << r.output;
}

}  // namespace
