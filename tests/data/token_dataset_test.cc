// Token datasets: window arithmetic (input/target shifted by one), sample
// counts, the train/eval split, and the same samples from memory and from a
// token file.
#include "data/token_dataset.h"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "data/token_file.h"
#include "tests/data/data_test_util.h"

namespace zt::data {
namespace {

using testing::ScratchDir;

std::vector<int32_t> Iota(int n, int start = 0) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(TokenDatasetTest, NumTokenSamples) {
  struct Case {
    int64_t n, seq_len, expect;
  } cases[] = {{0, 4, 0}, {4, 4, 0}, {5, 4, 1}, {8, 4, 1}, {9, 4, 2}, {10, 1, 9}, {100, 0, 0}};
  for (const Case& c : cases) EXPECT_EQ(NumTokenSamples(c.n, c.seq_len), c.expect) << c.n << " " << c.seq_len;
}

TEST(TokenDatasetTest, SamplesAreShiftedWindows) {
  auto source = std::make_shared<InMemoryTokens>(Iota(11, 100));  // 100..110
  auto ds = TokenDataset::Create(source, 4);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->size(), 2);  // (11 - 1) / 4
  int64_t in[4], tgt[4];
  ds->Fill(0, in, tgt);
  EXPECT_EQ(std::vector<int64_t>(in, in + 4), (std::vector<int64_t>{100, 101, 102, 103}));
  EXPECT_EQ(std::vector<int64_t>(tgt, tgt + 4), (std::vector<int64_t>{101, 102, 103, 104}));
  ds->Fill(1, in, tgt);
  EXPECT_EQ(std::vector<int64_t>(in, in + 4), (std::vector<int64_t>{104, 105, 106, 107}));
  EXPECT_EQ(std::vector<int64_t>(tgt, tgt + 4), (std::vector<int64_t>{105, 106, 107, 108}));

  std::vector<int64_t> bin(8), btgt(8);
  const std::vector<int64_t> samples = {1, 0};
  ds->FillBatch(samples, bin.data(), btgt.data());
  EXPECT_EQ(bin[0], 104);
  EXPECT_EQ(bin[4], 100);
  EXPECT_EQ(btgt[7], 104);
}

TEST(TokenDatasetTest, RangeOffsetsSamples) {
  auto source = std::make_shared<InMemoryTokens>(Iota(20));
  auto ds = TokenDataset::Create(source, TokenRange{10, 20}, 3, "eval split");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->size(), 3);
  int64_t in[3], tgt[3];
  ds->Fill(2, in, tgt);
  EXPECT_EQ(in[0], 16);
  EXPECT_EQ(tgt[2], 19);
  EXPECT_FALSE(TokenDataset::Create(source, TokenRange{10, 21}, 3).ok());
}

TEST(TokenDatasetTest, TooShortCorpusSaysWhatToDo) {
  auto source = std::make_shared<InMemoryTokens>(Iota(8));
  auto ds = TokenDataset::Create(source, 8, "corpus");
  ASSERT_FALSE(ds.ok());
  const std::string msg(ds.status().message());
  EXPECT_NE(msg.find("corpus of 8 tokens is shorter than one sequence of seq_len+1 = 9"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--seq-len"), std::string::npos) << msg;
  EXPECT_TRUE(TokenDataset::Create(source, 7).ok());
  EXPECT_FALSE(TokenDataset::Create(source, 0).ok());
}

TEST(TokenDatasetTest, SplitTrainEval) {
  auto split = SplitTrainEval(1000, 0.1, 8);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->train.begin, 0);
  EXPECT_EQ(split->train.end, 900);
  EXPECT_EQ(split->eval.begin, 900);
  EXPECT_EQ(split->eval.end, 1000);

  split = SplitTrainEval(1000, 0.0, 8);
  ASSERT_TRUE(split.ok());
  EXPECT_EQ(split->train.size(), 1000);
  EXPECT_EQ(split->eval.size(), 0);

  // A nonempty eval split must hold one sample of seq_len + 1 tokens.
  auto bad = SplitTrainEval(100, 0.05, 8);  // 5 eval tokens < 9
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("eval split"), std::string::npos) << bad.status();
  bad = SplitTrainEval(10, 0.5, 8);  // train 5 tokens
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("training split"), std::string::npos) << bad.status();
  EXPECT_FALSE(SplitTrainEval(100, 1.0, 2).ok());
  EXPECT_FALSE(SplitTrainEval(100, -0.1, 2).ok());
}

TEST(TokenDatasetTest, TokenFileGivesTheSameSamplesAsMemory) {
  ScratchDir dir;
  const std::vector<int32_t> tokens = Iota(37, 1000);
  ASSERT_TRUE(WriteTokenFile(dir.File("t.bin"), tokens).ok());
  auto file = OpenTokenFile(dir.File("t.bin"));
  ASSERT_TRUE(file.ok()) << file.status();
  auto from_file = TokenDataset::Create(std::make_shared<TokenFile>(std::move(*file)), 5);
  auto from_memory = TokenDataset::Create(std::make_shared<InMemoryTokens>(tokens), 5);
  ASSERT_TRUE(from_file.ok() && from_memory.ok());
  ASSERT_EQ(from_file->size(), from_memory->size());
  for (int64_t s = 0; s < from_file->size(); ++s) {
    int64_t a_in[5], a_tgt[5], b_in[5], b_tgt[5];
    from_file->Fill(s, a_in, a_tgt);
    from_memory->Fill(s, b_in, b_tgt);
    for (int t = 0; t < 5; ++t) {
      EXPECT_EQ(a_in[t], b_in[t]);
      EXPECT_EQ(a_tgt[t], b_tgt[t]);
    }
  }
}

}  // namespace
}  // namespace zt::data
