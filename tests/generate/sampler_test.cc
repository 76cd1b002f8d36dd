// generate/sampling/sampler.h: greedy is run.c's argmax (the first largest
// logit); sampling draws from softmax(logits / T) restricted by top-k and
// top-p, checked against the exact probabilities over many seeded draws
// (a chi-square bound), and the same seed gives the same tokens.
#include "generate/sampling/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

namespace zt::generate {
namespace {

TEST(Sampler, GreedyIsTheFirstLargestLogit) {
  auto s = Sampler::Create({});
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->greedy());
  EXPECT_EQ(s->Next(std::vector<float>{1, 3, 2, 3}), 1);
  EXPECT_EQ(s->Next(std::vector<float>{-INFINITY, -5, -7}), 1);
  EXPECT_EQ(Argmax(std::vector<float>{0.5f}), 0);
}

// Draw counts against the expected probabilities: the chi-square statistic
// of `draws` draws over k categories stays far below a 1e-6 tail (about
// k + 10 sqrt(2k) for these k), unless the distribution is wrong.
void ExpectDistribution(Sampler& s, const std::vector<float>& logits, const std::vector<double>& want, int draws) {
  std::map<int32_t, int> counts;
  for (int i = 0; i < draws; ++i) ++counts[s.Next(logits)];
  double chi2 = 0.0;
  int k = 0;
  for (size_t t = 0; t < want.size(); ++t) {
    const double expect = want[t] * draws;
    if (want[t] == 0.0) {
      EXPECT_EQ(counts[static_cast<int32_t>(t)], 0) << "token " << t << " is outside the kept set";
      continue;
    }
    ++k;
    const double d = counts[static_cast<int32_t>(t)] - expect;
    chi2 += d * d / expect;
  }
  EXPECT_LT(chi2, k + 10 * std::sqrt(2.0 * k)) << "draws do not follow the probabilities";
}

std::vector<double> Softmax(const std::vector<float>& logits, double t) {
  std::vector<double> p;
  double sum = 0;
  for (float l : logits) sum += std::exp(l / t);
  for (float l : logits) p.push_back(std::exp(l / t) / sum);
  return p;
}

TEST(Sampler, TemperatureSamplesTheSoftmax) {
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f, -1.0f, 0.5f};
  auto s = Sampler::Create({0.7, 0, 1.0, 42});
  ASSERT_TRUE(s.ok());
  ExpectDistribution(*s, logits, Softmax(logits, 0.7), 50000);
}

TEST(Sampler, TopKAndTopPKeepOnlyTheMostLikely) {
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f, -1.0f, 0.5f};
  const std::vector<double> p = Softmax(logits, 1.0);  // order: 0, 1, 4, 2, 3
  {
    auto s = Sampler::Create({1.0, 2, 1.0, 7});
    ASSERT_TRUE(s.ok());
    const double z = p[0] + p[1];
    ExpectDistribution(*s, logits, {p[0] / z, p[1] / z, 0, 0, 0}, 30000);
  }
  {
    // p[0] ~ 0.47, p[0] + p[1] ~ 0.64: top_p 0.6 keeps tokens 0 and 1.
    ASSERT_LT(p[0], 0.6);
    ASSERT_GE(p[0] + p[1], 0.6);
    auto s = Sampler::Create({1.0, 0, 0.6, 7});
    ASSERT_TRUE(s.ok());
    const double z = p[0] + p[1];
    ExpectDistribution(*s, logits, {p[0] / z, p[1] / z, 0, 0, 0}, 30000);
  }
  // top_k 1 is greedy at any temperature.
  auto s = Sampler::Create({5.0, 1, 1.0, 3});
  for (int i = 0; i < 100; ++i) EXPECT_EQ(s->Next(logits), 0);
}

TEST(Sampler, TheSameSeedGivesTheSameTokens) {
  const std::vector<float> logits = {0.1f, 0.2f, 0.3f, 0.0f, -0.2f, 0.25f};
  auto a = Sampler::Create({1.0, 0, 0.95, 9}), b = Sampler::Create({1.0, 0, 0.95, 9}),
       c = Sampler::Create({1.0, 0, 0.95, 10});
  std::vector<int32_t> ta, tb, tc;
  for (int i = 0; i < 200; ++i) {
    ta.push_back(a->Next(logits));
    tb.push_back(b->Next(logits));
    tc.push_back(c->Next(logits));
  }
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
}

// NaN never wins, +inf is certain, and logits with nothing finite still
// give a token (no undefined sort, no out-of-range read).
TEST(Sampler, NonFiniteLogitsAreHandled) {
  EXPECT_EQ(Argmax(std::vector<float>{NAN, 1.0f, 2.0f}), 2);
  auto s = Sampler::Create({1.0, 0, 0.9, 3});
  ASSERT_TRUE(s.ok());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s->Next(std::vector<float>{0.0f, INFINITY, 1.0f}), 1);
  for (int i = 0; i < 50; ++i) EXPECT_NE(s->Next(std::vector<float>{NAN, 0.0f, 1.0f}), 0);
  const int32_t t = s->Next(std::vector<float>{-INFINITY, -INFINITY});
  EXPECT_TRUE(t == 0 || t == 1);
}

TEST(Sampler, BadOptionsAreNamed) {
  EXPECT_NE(Sampler::Create({-1.0, 0, 1.0, 0}).status().message().find("--temperature"), std::string::npos);
  EXPECT_NE(Sampler::Create({NAN, 0, 1.0, 0}).status().message().find("--temperature"), std::string::npos);
  EXPECT_NE(Sampler::Create({1.0, -2, 1.0, 0}).status().message().find("--top-k"), std::string::npos);
  EXPECT_NE(Sampler::Create({1.0, 0, 0.0, 0}).status().message().find("--top-p"), std::string::npos);
  EXPECT_NE(Sampler::Create({1.0, 0, 1.5, 0}).status().message().find("--top-p"), std::string::npos);
}

}  // namespace
}  // namespace zt::generate
