// Sequence packing (data/packing.h): best-fit decreasing places every example
// once, no sample over its length, deterministically; a packed window gives
// each example the targets SupervisedWindow gives it alone, with its own
// document id, and padding after.
#include "data/packing.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <vector>

namespace zt::data {
namespace {

SupervisedExample Example(int32_t first, int64_t n, int64_t loss_from) {
  SupervisedExample e;
  e.ids.resize(static_cast<size_t>(n));
  std::iota(e.ids.begin(), e.ids.end(), first);
  e.loss_from = loss_from;
  return e;
}

TEST(Packing, BestFitDecreasingPlacesEachExampleOnce) {
  std::vector<SupervisedExample> ex;
  const std::vector<int64_t> lengths = {5, 9, 3, 12, 7, 2, 8, 4, 20, 1};
  for (size_t i = 0; i < lengths.size(); ++i) ex.push_back(Example(100 * static_cast<int32_t>(i), lengths[i], 1));
  const int64_t seq_len = 12;
  const std::vector<PackedSample> samples = PackExamples(ex, seq_len);
  std::multiset<int64_t> placed;
  int64_t tokens = 0;
  for (const PackedSample& s : samples) {
    int64_t used = 0;
    for (int64_t i : s.examples) {
      placed.insert(i);
      used += PackedLength(ex[static_cast<size_t>(i)], seq_len);
    }
    EXPECT_LE(used, seq_len);
    tokens += used;
  }
  EXPECT_EQ(placed.size(), ex.size());
  EXPECT_EQ(std::set<int64_t>(placed.begin(), placed.end()).size(), ex.size());
  // 63 tokens (20 cut to 12) in samples of 12: 6 is the least possible, and
  // best-fit decreasing reaches it here.
  EXPECT_EQ(tokens, 63);
  EXPECT_EQ(samples.size(), 6u);
  // Longest first: the cut example and the 12 open the first two samples.
  EXPECT_EQ(samples[0].examples.front(), 3);
  EXPECT_EQ(samples[1].examples.front(), 8);
  // Deterministic.
  const std::vector<PackedSample> again = PackExamples(ex, seq_len);
  ASSERT_EQ(again.size(), samples.size());
  for (size_t i = 0; i < samples.size(); ++i) EXPECT_EQ(again[i].examples, samples[i].examples);
}

TEST(Packing, WindowGivesEachExampleItsOwnTargets) {
  const std::vector<SupervisedExample> ex = {Example(10, 4, 2), Example(20, 3, 1), Example(30, 9, 5)};
  const int64_t seq_len = 8;
  // Examples 0 and 1 together, then padding; example 2 cut alone.
  std::vector<int64_t> input(8), target(8), docs(8);
  EXPECT_EQ(PackedWindow(ex, PackedSample{{0, 1}}, seq_len, 0, input.data(), target.data(), docs.data()), 2 + 2);
  EXPECT_EQ(input, (std::vector<int64_t>{10, 11, 12, 13, 20, 21, 22, 0}));
  EXPECT_EQ(target, (std::vector<int64_t>{-100, 12, 13, -100, 21, 22, -100, -100}));
  EXPECT_EQ(docs, (std::vector<int64_t>{1, 1, 1, 1, 2, 2, 2, 0}));
  // Alone each example gets the same targets from SupervisedWindow.
  for (size_t i = 0; i < 2; ++i) {
    std::vector<int64_t> in(8), tg(8);
    SupervisedWindow(ex[i], seq_len, 0, in.data(), tg.data());
    const int64_t at = i == 0 ? 0 : 4, n = static_cast<int64_t>(ex[i].ids.size());
    for (int64_t k = 0; k < n; ++k) EXPECT_EQ(target[static_cast<size_t>(at + k)], tg[static_cast<size_t>(k)]);
  }
  // A cut example's last position predicts the token after the cut, as
  // SupervisedWindow's does.
  EXPECT_EQ(PackedWindow(ex, PackedSample{{2}}, seq_len, 0, input.data(), target.data(), docs.data()), 4);
  EXPECT_EQ(target, (std::vector<int64_t>{-100, -100, -100, -100, 35, 36, 37, 38}));
  EXPECT_EQ(docs, (std::vector<int64_t>(8, 1)));
}

}  // namespace
}  // namespace zt::data
