// The PRNG (reference values, unbiased shuffles), DistributedSampler
// (coverage and padding over ranks, per-epoch orders), SampleStream resume,
// and EvalShard (each sample exactly once, equal batch counts, masks).
#include "data/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "data/prng.h"

namespace zt::data {
namespace {

TEST(PrngTest, SplitMix64MatchesTheReferenceImplementation) {
  // First outputs of the reference splitmix64.c seeded with 0 (as also used
  // to seed xoshiro in its authors' code).
  uint64_t state = 0;
  EXPECT_EQ(SplitMix64(&state), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(SplitMix64(&state), 0x6e789e6aa1b965f4ULL);
}

TEST(PrngTest, BelowIsInRangeAndRoughlyUniform) {
  Xoshiro256 rng(42);
  std::vector<int> counts(6, 0);
  for (int i = 0; i < 60000; ++i) {
    const uint64_t v = rng.Below(6);
    ASSERT_LT(v, 6u);
    ++counts[v];
  }
  for (int c : counts) EXPECT_NEAR(c, 10000, 600);  // > 6 sigma
  EXPECT_EQ(rng.Below(1), 0u);
}

TEST(PrngTest, PermutationIsAPermutationAndSeedDependent) {
  Xoshiro256 a(7), b(7), c(8);
  const std::vector<int64_t> pa = RandomPermutation(100, a);
  EXPECT_EQ(pa, RandomPermutation(100, b));
  EXPECT_NE(pa, RandomPermutation(100, c));
  std::vector<int64_t> sorted = pa;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(sorted[i], i);
  EXPECT_TRUE(RandomPermutation(0, a).empty());
}

DistributedSampler MakeSampler(int64_t n, int w, int r, bool drop_last, bool shuffle = true, uint64_t seed = 1234) {
  SamplerOptions o;
  o.num_samples = n;
  o.world_size = w;
  o.rank = r;
  o.seed = seed;
  o.shuffle = shuffle;
  o.drop_last = drop_last;
  auto s = DistributedSampler::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

TEST(SamplerTest, RanksCoverEveryIndexOncePlusPadding) {
  for (int64_t n : {1, 7, 10, 13}) {
    for (int w = 1; w <= 5; ++w) {
      for (int64_t epoch : {0, 3}) {
        SCOPED_TRACE(testing::Message() << "N=" << n << " W=" << w << " epoch=" << epoch);
        std::map<int64_t, int> seen;
        int64_t per_rank = -1;
        for (int r = 0; r < w; ++r) {
          DistributedSampler s = MakeSampler(n, w, r, /*drop_last=*/false);
          if (per_rank < 0) per_rank = s.per_rank();
          EXPECT_EQ(s.per_rank(), per_rank);  // same on every rank
          const std::vector<int64_t> mine = s.EpochIndices(epoch);
          ASSERT_EQ(static_cast<int64_t>(mine.size()), s.per_rank());
          for (int64_t i : mine) {
            ASSERT_TRUE(i >= 0 && i < n) << i;
            ++seen[i];
          }
        }
        EXPECT_EQ(per_rank, (n + w - 1) / w);
        ASSERT_EQ(static_cast<int64_t>(seen.size()), n);  // every index at least once
        int64_t repeats = 0;
        for (const auto& [index, count] : seen) repeats += count - 1;
        EXPECT_EQ(repeats, per_rank * w - n);  // the padding
      }
    }
  }
}

TEST(SamplerTest, DropLastTruncatesAndNeverRepeats) {
  for (int64_t n : {7, 10, 13}) {
    for (int w = 1; w <= 5; ++w) {
      SCOPED_TRACE(testing::Message() << "N=" << n << " W=" << w);
      std::set<int64_t> seen;
      for (int r = 0; r < w; ++r) {
        DistributedSampler s = MakeSampler(n, w, r, /*drop_last=*/true);
        EXPECT_EQ(s.per_rank(), n / w);
        for (int64_t i : s.EpochIndices(1)) EXPECT_TRUE(seen.insert(i).second) << "repeated " << i;
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), (n / w) * w);
    }
  }
  SamplerOptions o;
  o.num_samples = 3;
  o.world_size = 4;
  o.drop_last = true;
  EXPECT_FALSE(DistributedSampler::Create(o).ok());
}

TEST(SamplerTest, StridedLikePyTorch) {
  // Without shuffle the order is 0..N-1, padded from its start, dealt round robin:
  // N=5, W=2: padded [0 1 2 3 4 0] -> rank 0: 0 2 4, rank 1: 1 3 0.
  EXPECT_EQ(MakeSampler(5, 2, 0, false, false).EpochIndices(0), (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(MakeSampler(5, 2, 1, false, false).EpochIndices(0), (std::vector<int64_t>{1, 3, 0}));
  EXPECT_EQ(MakeSampler(5, 2, 1, true, false).EpochIndices(0), (std::vector<int64_t>{1, 3}));
  // N=1, W=3: every rank gets sample 0.
  for (int r = 0; r < 3; ++r) EXPECT_EQ(MakeSampler(1, 3, r, false, false).EpochIndices(0), (std::vector<int64_t>{0}));
  // With shuffle, rank r takes positions r, r+W, ... of the epoch order.
  DistributedSampler s = MakeSampler(10, 3, 2, false);
  const std::vector<int64_t> order = s.EpochOrder(5);
  EXPECT_EQ(s.EpochIndices(5), (std::vector<int64_t>{order[2], order[5], order[8], order[(11) % 10]}));
}

TEST(SamplerTest, EpochsDifferSeedsRepeat) {
  DistributedSampler a = MakeSampler(100, 1, 0, false, true, 1);
  DistributedSampler b = MakeSampler(100, 1, 0, false, true, 1);
  DistributedSampler c = MakeSampler(100, 1, 0, false, true, 2);
  EXPECT_EQ(a.EpochOrder(0), b.EpochOrder(0));
  EXPECT_EQ(a.EpochOrder(7), b.EpochOrder(7));
  EXPECT_NE(a.EpochOrder(0), a.EpochOrder(1));
  EXPECT_NE(a.EpochOrder(0), c.EpochOrder(0));
  std::vector<int64_t> identity(100);
  for (int i = 0; i < 100; ++i) identity[i] = i;
  EXPECT_NE(a.EpochOrder(0), identity);
  EXPECT_EQ(MakeSampler(100, 1, 0, false, false).EpochOrder(3), identity);
}

TEST(SampleStreamTest, CrossesEpochsInOrder) {
  DistributedSampler s = MakeSampler(10, 3, 1, false);  // per_rank 4
  std::vector<int64_t> expected = s.EpochIndices(0);
  for (int64_t e = 1; e < 4; ++e) {
    const std::vector<int64_t> more = s.EpochIndices(e);
    expected.insert(expected.end(), more.begin(), more.end());
  }
  SampleStream stream(s);
  std::vector<int64_t> got;
  for (int64_t bs : {3, 3, 1, 6, 3}) {  // 16 = 4 epochs of 4
    const std::vector<int64_t> batch = stream.Next(bs);
    ASSERT_EQ(static_cast<int64_t>(batch.size()), bs);
    got.insert(got.end(), batch.begin(), batch.end());
  }
  EXPECT_EQ(got, expected);
  EXPECT_EQ(stream.position(), (StreamPosition{4, 0}));
}

TEST(SampleStreamTest, ResumeFromSavedPositionReproducesContinuation) {
  for (int w : {1, 2, 3}) {
    for (int r = 0; r < w; ++r) {
      SCOPED_TRACE(testing::Message() << "W=" << w << " rank=" << r);
      DistributedSampler s = MakeSampler(13, w, r, false, true, 99);
      SampleStream original(s);
      for (int i = 0; i < 5; ++i) original.Next(3);  // mid-epoch somewhere
      const StreamPosition saved = original.position();
      std::vector<std::vector<int64_t>> continuation;
      for (int i = 0; i < 8; ++i) continuation.push_back(original.Next(i % 2 ? 2 : 5));

      SampleStream resumed(MakeSampler(13, w, r, false, true, 99));
      ASSERT_TRUE(resumed.SetPosition(saved).ok());
      for (int i = 0; i < 8; ++i) EXPECT_EQ(resumed.Next(i % 2 ? 2 : 5), continuation[i]) << "batch " << i;
      EXPECT_EQ(resumed.position(), original.position());
    }
  }
}

TEST(SampleStreamTest, PositionsAreEqualOnAllRanks) {
  std::vector<SampleStream> streams;
  for (int r = 0; r < 3; ++r) streams.emplace_back(MakeSampler(11, 3, r, false));
  for (int step = 0; step < 10; ++step) {
    for (SampleStream& st : streams) st.Next(2);
    for (SampleStream& st : streams) EXPECT_EQ(st.position(), streams[0].position());
  }
}

TEST(SampleStreamTest, SetPositionRejectsBadPositions) {
  SampleStream stream(MakeSampler(10, 2, 0, false));  // per_rank 5
  EXPECT_FALSE(stream.SetPosition({0, 5}).ok());
  EXPECT_FALSE(stream.SetPosition({-1, 0}).ok());
  EXPECT_FALSE(stream.SetPosition({0, -1}).ok());
  EXPECT_TRUE(stream.SetPosition({2, 4}).ok());
}

TEST(EvalShardTest, EachIndexOnceEqualBatchesContiguousRanges) {
  for (int64_t n : {0, 1, 3, 7, 10, 13, 64}) {
    for (int w = 1; w <= 5; ++w) {
      for (int64_t bs : {1, 3, 4, 100}) {
        SCOPED_TRACE(testing::Message() << "N=" << n << " W=" << w << " batch=" << bs);
        std::vector<int> seen(static_cast<size_t>(n), 0);
        std::vector<int64_t> sizes;  // batch sizes of rank 0
        for (int r = 0; r < w; ++r) {
          auto batches = EvalShard(n, w, r, bs);
          ASSERT_TRUE(batches.ok()) << batches.status();
          std::vector<int64_t> my_sizes;
          std::vector<int64_t> mine;
          for (const EvalBatch& b : *batches) {
            ASSERT_EQ(b.indices.size(), b.valid.size());
            ASSERT_LE(static_cast<int64_t>(b.indices.size()), bs);
            my_sizes.push_back(static_cast<int64_t>(b.indices.size()));
            int64_t valid = 0;
            for (size_t i = 0; i < b.indices.size(); ++i) {
              ASSERT_TRUE(b.indices[i] >= 0 && b.indices[i] < std::max<int64_t>(n, 1));  // padding is a valid index
              if (b.valid[i]) {
                ++seen[b.indices[i]];
                mine.push_back(b.indices[i]);
                ++valid;
              }
            }
            EXPECT_EQ(b.num_valid(), valid);
          }
          if (r == 0) sizes = my_sizes;
          EXPECT_EQ(my_sizes, sizes);  // same number and sizes of batches on every rank
          const int64_t begin = r * n / w, end = (r + 1) * n / w;
          std::vector<int64_t> expected;
          for (int64_t i = begin; i < end; ++i) expected.push_back(i);
          EXPECT_EQ(mine, expected);  // contiguous, in order
        }
        for (int64_t i = 0; i < n; ++i) EXPECT_EQ(seen[i], 1) << "index " << i;
        if (n == 0) {
          EXPECT_TRUE(sizes.empty());
        }
      }
    }
  }
}

TEST(EvalShardTest, RanksWithoutSamplesGetOnlyPadding) {
  // N=2 over W=4: ranks 0 and 2 own nothing ([0,0) and [1,1)), yet run one batch.
  for (int r = 0; r < 4; ++r) {
    auto batches = EvalShard(2, 4, r, 8);
    ASSERT_TRUE(batches.ok());
    ASSERT_EQ(batches->size(), 1u);
    EXPECT_EQ((*batches)[0].indices.size(), 1u);
    EXPECT_EQ((*batches)[0].num_valid(), (r == 1 || r == 3) ? 1 : 0) << "rank " << r;
  }
  EXPECT_FALSE(EvalShard(10, 2, 0, 0).ok());
  EXPECT_FALSE(EvalShard(10, 2, 2, 4).ok());
  EXPECT_FALSE(EvalShard(10, 0, 0, 4).ok());
}

// One step's global batch: every rank's next micro-batch, together.
std::multiset<int64_t> GlobalStep(std::vector<SampleStream>& ranks, int64_t micro) {
  std::multiset<int64_t> step;
  for (SampleStream& s : ranks) {
    for (int64_t i : s.Next(micro)) step.insert(i);
  }
  return step;
}

std::vector<SampleStream> Streams(int64_t n, int world, StreamPosition at) {
  std::vector<SampleStream> ranks;
  for (int r = 0; r < world; ++r) {
    SampleStream s(DistributedSampler::Create({n, world, r, /*seed=*/7, true, false}).value());
    EXPECT_TRUE(s.SetPosition(at).ok());
    ranks.push_back(std::move(s));
  }
  return ranks;
}

// A run of 25 steps of global batch 6 over 60 samples (2.5 epochs) at 2
// ranks, against the same run interrupted after 7 steps, resumed at 3 ranks,
// interrupted after 9 more and resumed at 1: every step draws the same global
// batch, so the multiset of samples seen is the uninterrupted run's.
TEST(PositionAtWorldSize, ResumingAt2Then3Then1RanksDrawsTheSameBatches) {
  const int64_t n = 60, batch = 6;
  std::vector<SampleStream> straight = Streams(n, 2, {});
  std::vector<std::multiset<int64_t>> want;
  for (int s = 0; s < 25; ++s) want.push_back(GlobalStep(straight, batch / 2));

  std::vector<std::multiset<int64_t>> got;
  std::vector<SampleStream> two = Streams(n, 2, {});
  for (int s = 0; s < 7; ++s) got.push_back(GlobalStep(two, batch / 2));
  int64_t repeated = -1;
  const StreamPosition at3 = PositionAtWorldSize(two[0].position(), 2, Streams(n, 3, {})[0].sampler(), &repeated);
  EXPECT_EQ(repeated, 0);
  std::vector<SampleStream> three = Streams(n, 3, at3);
  for (int s = 0; s < 9; ++s) got.push_back(GlobalStep(three, batch / 3));
  const StreamPosition at1 = PositionAtWorldSize(three[0].position(), 3, Streams(n, 1, {})[0].sampler(), &repeated);
  EXPECT_EQ(repeated, 0);
  std::vector<SampleStream> one = Streams(n, 1, at1);
  for (int s = 0; s < 9; ++s) got.push_back(GlobalStep(one, batch));

  ASSERT_EQ(got.size(), want.size());
  std::multiset<int64_t> all_want, all_got;
  for (size_t s = 0; s < want.size(); ++s) {
    EXPECT_EQ(got[s], want[s]) << "step " << s + 1;
    all_want.insert(want[s].begin(), want[s].end());
    all_got.insert(got[s].begin(), got[s].end());
  }
  EXPECT_EQ(all_got, all_want);
}

// A global batch that changes with the world: 3 steps of 2 x 3 consumed 9
// per rank = 18 positions; at 4 ranks that is 4 per rank (16) and 2 dealt
// again, said in `repeated`, none skipped. Past the new world's last
// position of the epoch the stream moves to the next epoch.
TEST(PositionAtWorldSize, RoundsDownAndSaysHowManyRepeat) {
  const DistributedSampler four = DistributedSampler::Create({60, 4, 0, 7, true, false}).value();
  int64_t repeated = -1;
  const StreamPosition p = PositionAtWorldSize({1, 9}, 2, four, &repeated);
  EXPECT_EQ(p, (StreamPosition{1, 4}));
  EXPECT_EQ(repeated, 2);
  // 7 samples over 2 ranks, offset 3: 6 positions consumed; with drop_last
  // at 3 ranks the epoch has 6 positions (2 per rank), so it is over.
  const DistributedSampler drop3 = DistributedSampler::Create({7, 3, 0, 7, true, true}).value();
  EXPECT_EQ(PositionAtWorldSize({0, 3}, 2, drop3, &repeated), (StreamPosition{1, 0}));
  EXPECT_EQ(repeated, 0);
}

}  // namespace
}  // namespace zt::data
