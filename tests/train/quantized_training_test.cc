// ZeRO++ qwZ and qgZ end to end: `zt train` of gpt2-mini at stage 3 on 4 ranks for
// 200 steps, with and without zero_quantized_weights. The rounded compute
// weights must not cost the training: the final loss (the mean of the last
// 10 logged, to average out one batch's noise) within 2% of the unquantized
// run's. And the shard group's bytes fall as the wire format says: every
// chunk is gathered at least once in forward and reduce-scattered once in
// backward, so gathers are at least half of the unquantized bytes; at just
// over 1/4 of their fp32 size (int8 + a scale per 2048) the total is at most
// 0.5 + 0.5 * 0.26 = 0.63 of it (less where backward gathers again).
// With qgZ too (zero_quantized_gradients, int8) the reduce-scatter's slices
// shrink alike, so every shard-group byte is int8 plus scales and padding:
// at most 0.26 of the unquantized run's.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/testing/scratch_dir.h"
#include "tests/testing/zt_command.h"

namespace zt::testing {
namespace {

// (step, value) rows of a csv_monitor file.
std::vector<std::pair<int64_t, double>> Csv(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<std::pair<int64_t, double>> rows;
  bool header = true;
  for (absl::string_view line : absl::StrSplit(ss.str(), '\n', absl::SkipEmpty())) {
    if (header) {
      header = false;
      continue;
    }
    std::vector<std::string> f = absl::StrSplit(line, ',');
    int64_t step = 0;
    double v = 0;
    if (f.size() == 2 && absl::SimpleAtoi(f[0], &step) && absl::SimpleAtod(f[1], &v)) rows.emplace_back(step, v);
  }
  return rows;
}

double MeanOfLast(const std::vector<std::pair<int64_t, double>>& rows, size_t n) {
  double s = 0;
  for (size_t i = rows.size() - n; i < rows.size(); ++i) s += rows[i].second;
  return s / static_cast<double>(n);
}

TEST(QuantizedCommunication, Gpt2MiniLossStaysWithinTwoPercentOnAQuarterOfTheBytes) {
  ScratchDir dir("zt_qwz_train");
  // Unquantized, qwZ, qwZ + qgZ.
  const char* runs[3][2] = {{"fp32", ""},
                            {"qwz", " --set zero_optimization.zero_quantized_weights=true"},
                            {"qwz_qgz",
                             " --set zero_optimization.zero_quantized_weights=true"
                             " --set zero_optimization.zero_quantized_gradients=true"}};
  double loss[3] = {0, 0, 0}, bytes[3] = {0, 0, 0};
  for (int q = 0; q < 3; ++q) {
    const std::string out = dir.File(runs[q][0]);
    const ZtRun r =
        RunZt(absl::StrCat("train --model gpt2-mini --stage 3 --nproc 4 --micro-batch 4 --steps 200 --seed 5 "
                           "--eval-interval -1 --report none --no-progress --set steps_per_print=10 "
                           "--set zero_optimization.stage3_param_persistence_threshold=0",
                           runs[q][1], " --output-dir ", out),
              "OMP_NUM_THREADS=1");
    ASSERT_EQ(r.code, 0) << r.output;
    const auto losses = Csv(out + "/gpt2-mini/Train_Samples_train_loss.csv");
    const auto comm = Csv(out + "/gpt2-mini/Train_Samples_comm_bytes_shard_group.csv");
    ASSERT_EQ(losses.size(), 200u) << r.output;
    ASSERT_FALSE(comm.empty());
    loss[q] = MeanOfLast(losses, 10);
    for (const auto& [step, v] : comm) bytes[q] += v;
  }
  for (int q = 1; q < 3; ++q) {
    const double rel = (loss[q] - loss[0]) / loss[0];
    EXPECT_LT(std::abs(rel), 0.02) << "final loss fp32 " << loss[0] << ", " << runs[q][0] << " " << loss[q];
    std::printf("final loss (mean of the last 10 steps): fp32 %.4f, %s %.4f (%+.2f%%); shard-group bytes %.4gx\n",
                loss[0], runs[q][0], loss[q], 100 * rel, bytes[q] / bytes[0]);
  }
  EXPECT_LE(bytes[1], 0.63 * bytes[0]) << "shard-group bytes fp32 " << bytes[0] << ", qwZ " << bytes[1];
  EXPECT_LE(bytes[2], 0.26 * bytes[0]) << "shard-group bytes fp32 " << bytes[0] << ", qwZ + qgZ " << bytes[2];
}

}  // namespace
}  // namespace zt::testing
