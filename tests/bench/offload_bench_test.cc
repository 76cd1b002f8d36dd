// zt_bench_offload's two schedules, run as the suite runs it (zt launch, 2
// ranks) on a 1.7M-parameter GPT-2 shape whose optimizer state and parameter
// shards do not fit their swap buffers, so every NVMe mode moves bytes each
// step. Interleaved turns put untimed steps between a mode's timed ones; the
// offload counters must leave those out, so the bytes and fixed pieces per
// step equal the blocked schedule's exactly. Counts and structure, never
// times: the ratios themselves are the benchmark's to report.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "benchmarks/results.h"
#include "tests/testing/zt_command.h"

namespace zt::bench {
namespace {

namespace fs = std::filesystem;

// mode -> its RESULT row.
using Rows = std::map<std::string, ResultRow>;

Rows RunBench(const std::string& schedule, const fs::path& swap) {
  const std::string bin = ZT_BINARY_DIR "/bin/";
  const testing::ZtRun run = testing::RunShell(absl::StrCat(
      bin, "zt launch --nproc-per-node 2 -- ", bin,
      "zt_bench_offload --model gpt2-tiny --set n_layer=2 --set n_embd=256 --set n_head=4 --set vocab=256 "
      "--set seq_len=32 --micro-batch 2 --seq 32 --steps 2 --warmup 1 --rounds 2 --bucket 600000 "
      "--sub-group-size 300000 --buffer-count 4 --param-buffer-count 2 --max-live 1200000 --reuse-distance 0 "
      "--stage 3 --modes none,nvme,nvme-params --nvme-path ",
      swap.string(), " ", schedule));
  EXPECT_EQ(run.code, 0) << run.output;
  absl::StatusOr<BenchLog> log = ParseBenchLog(run.output, "zt_bench_offload " + schedule);
  EXPECT_TRUE(log.ok()) << log.status();
  Rows rows;
  if (log.ok()) {
    for (const ResultRow& row : log->rows) rows[row.Get("mode")] = row;
  }
  return rows;
}

double Number(const ResultRow& row, const std::string& key) {
  double v = -1;
  EXPECT_TRUE(row.GetNumber(key, &v)) << key << " in " << row.Line();
  return v;
}

TEST(OffloadBench, InterleavedTurnsCountOnlyTheirTimedSteps) {
  const fs::path swap = fs::path(::testing::TempDir()) / "zt_offload_bench_test";
  fs::remove_all(swap);
  const Rows blocked = RunBench("", swap);
  const Rows interleaved = RunBench("--interleave", swap);
  ASSERT_EQ(blocked.size(), 3u);
  ASSERT_EQ(interleaved.size(), 3u);
  for (const std::string mode : {"nvme", "nvme-params"}) {
    SCOPED_TRACE(mode);
    const ResultRow& b = blocked.at(mode);
    const ResultRow& i = interleaved.at(mode);
    EXPECT_GT(Number(b, "nvme_read_per_step"), 0);
    EXPECT_GT(Number(b, "nvme_written_per_step"), 0);
    for (const char* key : {"nvme_read_per_step", "nvme_written_per_step", "fixed_pieces_per_step"}) {
      EXPECT_EQ(Number(i, key), Number(b, key)) << key;
    }
  }
  for (const auto& [mode, row] : interleaved) {
    SCOPED_TRACE(mode);
    // All modes are alive at once: no peak RSS is claimed for one.
    EXPECT_EQ(row.Get("peak_rss_gib"), "-");
    EXPECT_GE(Number(row, "quiet_steps"), 0);
    EXPECT_LE(Number(row, "quiet_steps"), 4);  // 2 rounds x 2 timed steps
    EXPECT_GT(Number(row, "ratio_to_none"), 0);
    EXPECT_GT(Number(row, "cpu_ratio_to_none"), 0);
  }
  EXPECT_EQ(Number(interleaved.at("none"), "ratio_to_none"), 1.0);
  EXPECT_EQ(Number(interleaved.at("none"), "cpu_ratio_to_none"), 1.0);
  EXPECT_EQ(Number(blocked.at("none"), "cpu_ratio_to_none"), 1.0);
  EXPECT_NE(blocked.at("none").Get("peak_rss_gib"), "-");
  fs::remove_all(swap);
}

}  // namespace
}  // namespace zt::bench
