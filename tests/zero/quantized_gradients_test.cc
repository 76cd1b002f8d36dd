// qgZ's reduction (zero/quantized_gradients.h) with the all-to-all done by
// hand in one process: every rank's bucket quantized for its peers, block r
// of each sender's buffer handed to rank r, and the dequantized sum checked
// element by element against the exact fp64 sum within the stated bound,
// computed here from the inputs (each sender's block amax / qmax / 2),
// not from the records. Also: the own slice is exact, nothing stale goes on
// the wire, and LoCo's error feedback does what it claims (the time average
// of what is sent converges to the gradient; Scale follows a loss-scale
// change exactly; reset_T clears).
#include "zero/quantized_gradients.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "comm/process_group.h"

namespace zt::zero {
namespace {

using comm::ShardBegin;
using comm::ShardEnd;

// Gradient-like values: mostly small, some blocks with an outlier.
at::Tensor Bucket(int64_t numel, uint64_t seed) {
  at::manual_seed(seed);
  at::Tensor x = at::randn({numel}) * 1e-3;
  for (int64_t i = 17; i < numel; i += 3001) x[i] = 0.05 * ((i % 2) ? 1 : -1);
  return x;
}

// Every rank's reduced slice, through QuantizedReduction and a hand-made all-to-all.
std::vector<at::Tensor> Reduce(const std::vector<at::Tensor>& buckets, const ops::QuantFormat& f,
                               std::vector<ErrorFeedback>* feedback = nullptr) {
  const int n = static_cast<int>(buckets.size());
  const int64_t numel = buckets[0].numel();
  std::vector<at::Tensor> send;
  for (int s = 0; s < n; ++s) {
    const QuantizedReduction plan(numel, n, s, f);
    send.push_back(at::full({plan.wire_numel()}, 0xAB, at::TensorOptions().dtype(at::kByte)));
    plan.QuantizeForPeers(buckets[s], send[s], feedback ? &(*feedback)[s] : nullptr);
  }
  std::vector<at::Tensor> out;
  for (int r = 0; r < n; ++r) {
    const QuantizedReduction plan(numel, n, r, f);
    const int64_t rec = plan.record_bytes();
    at::Tensor received = at::empty({plan.wire_numel()}, at::TensorOptions().dtype(at::kByte));
    for (int s = 0; s < n; ++s) received.narrow(0, s * rec, rec).copy_(send[s].narrow(0, r * rec, rec));
    at::Tensor shard = at::full({ShardEnd(numel, n, r) - ShardBegin(numel, n, r)}, 7.0f);
    plan.DequantizeSum(received, buckets[r], shard);
    out.push_back(shard);
  }
  return out;
}

class QgzWorlds : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(QgzWorlds, EveryElementWithinTheSumOfTheSendersHalfScales) {
  const auto [world, bits] = GetParam();
  const ops::QuantFormat f{bits, 2048};
  const double qmax = bits == 8 ? 127 : 7;
  for (int64_t numel : {int64_t{1}, int64_t{4099}, int64_t{5 * 2048 * world + 13}}) {
    std::vector<at::Tensor> buckets;
    for (int s = 0; s < world; ++s) buckets.push_back(Bucket(numel, 100 * world + s + numel));
    const std::vector<at::Tensor> got = Reduce(buckets, f);
    for (int r = 0; r < world; ++r) {
      const int64_t b = ShardBegin(numel, world, r);
      const int64_t len = ShardEnd(numel, world, r) - b;
      ASSERT_EQ(got[r].numel(), len);
      for (int64_t i = 0; i < len; ++i) {
        double exact = 0, bound = 0, magnitude = 0;
        for (int s = 0; s < world; ++s) {
          const float* x = buckets[s].data_ptr<float>() + b;
          exact += x[i];
          magnitude += std::abs(x[i]);
          if (s == r) continue;
          // The sender's block holding i: blocks start at the slice's start.
          const int64_t lo = i / f.block * f.block, hi = std::min(len, lo + f.block);
          double amax = 0;
          for (int64_t j = lo; j < hi; ++j) amax = std::max(amax, static_cast<double>(std::abs(x[j])));
          bound += amax / qmax * (0.5 + 1e-4);
        }
        bound += 4 * world * 1.2e-7 * (magnitude + bound);  // the fp32 sum's own rounding
        const double err = std::abs(got[r].data_ptr<float>()[i] - exact);
        ASSERT_LE(err, bound) << "world " << world << " bits " << bits << " numel " << numel << " rank " << r
                              << " element " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Qgz, QgzWorlds, ::testing::Combine(::testing::Values(2, 3, 4, 8), ::testing::Values(8, 4)));

TEST(Qgz, OwnSliceIsExactAndTheWireCarriesNothingStale) {
  const int world = 3;
  const int64_t numel = 7001;  // uneven slices: the last record is padded
  std::vector<at::Tensor> buckets = {at::zeros({numel}), Bucket(numel, 9), at::zeros({numel})};
  const std::vector<at::Tensor> got = Reduce(buckets, {8, 2048});
  const int64_t b = ShardBegin(numel, world, 1);
  // Its peers send zeros, which quantize to exact zeros (scale 0).
  EXPECT_TRUE(at::equal(got[1], buckets[1].narrow(0, b, got[1].numel()))) << "the own slice is summed exactly";
  // The send buffer (filled with 0xAB before): the own block and the padding are zeros.
  const QuantizedReduction plan(numel, world, 1, {8, 2048});
  at::Tensor send = at::full({plan.wire_numel()}, 0xAB, at::TensorOptions().dtype(at::kByte));
  plan.QuantizeForPeers(buckets[1], send, nullptr);
  const int64_t rec = plan.record_bytes();
  EXPECT_EQ(send.narrow(0, rec, rec).count_nonzero().item<int64_t>(), 0);
  const int64_t last_len = ShardEnd(numel, world, 2) - ShardBegin(numel, world, 2);
  const int64_t used = ops::QuantWireBytes(last_len, {8, 2048});
  ASSERT_LT(used, rec);
  EXPECT_EQ(send.narrow(0, 2 * rec + used, rec - used).count_nonzero().item<int64_t>(), 0);
}

TEST(Qgz, ARecordHoldingANonFiniteValueGivesNaNNotAFiniteSum) {
  std::vector<at::Tensor> buckets = {Bucket(4096, 1), Bucket(4096, 2)};
  buckets[1][10] = std::numeric_limits<float>::infinity();  // rank 0's slice, from rank 1
  const std::vector<at::Tensor> got = Reduce(buckets, {8, 2048});
  EXPECT_FALSE(at::isfinite(got[0]).all().item<bool>()) << "an fp16 overflow must stay visible";
}

// Classical error feedback (err_beta 0: e is exactly this reduction's
// rounding): the sum over T reductions of what a sender sends equals T g up
// to the last stored error, so the time average converges to g while
// without feedback the same rounding repeats every time.
TEST(Qgz, ErrorFeedbackMakesTheTimeAverageConverge) {
  const int world = 2;
  const int64_t numel = 4096;
  const ops::QuantFormat f{4, 2048};
  std::vector<at::Tensor> buckets = {at::zeros({numel}), Bucket(numel, 3)};
  const at::Tensor want = buckets[1].narrow(0, 0, numel / 2);  // rank 0's slice of rank 1's gradient
  double err_plain = 0, err_fed = 0;
  for (bool fed : {false, true}) {
    std::vector<ErrorFeedback> fb;
    for (int s = 0; s < world; ++s) fb.emplace_back(numel, world, ErrorFeedbackOptions{0.0, 1000});
    at::Tensor total = at::zeros_like(want);
    const int T = 64;
    for (int t = 0; t < T; ++t) total += Reduce(buckets, f, fed ? &fb : nullptr)[0];
    const double err = (total / T - want).abs().max().item<double>();
    (fed ? err_fed : err_plain) = err;
  }
  EXPECT_GT(err_plain, 0);
  EXPECT_LT(err_fed, err_plain / 8) << "plain " << err_plain << ", with feedback " << err_fed;
}

// A loss-scale change by a power of two: scaling the stored errors and the
// gradient by it gives exactly the scaled records.
TEST(Qgz, ScaledErrorFeedbackFollowsTheLossScaleExactly) {
  const int64_t numel = 6000;
  const ops::QuantFormat f{8, 2048};
  const at::Tensor g = Bucket(numel, 4);
  const QuantizedReduction plan(numel, 2, 0, f);
  ErrorFeedback a(numel, 2, {0.8, 1000});
  ErrorFeedback b(numel, 2, {0.8, 1000});
  at::Tensor sa = at::empty({plan.wire_numel()}, at::TensorOptions().dtype(at::kByte));
  at::Tensor sb = at::empty_like(sa);
  plan.QuantizeForPeers(g, sa, &a);
  plan.QuantizeForPeers(g, sb, &b);
  b.Scale(4.0);
  plan.QuantizeForPeers(g, sa, &a);
  plan.QuantizeForPeers(g * 4, sb, &b);
  const int64_t rec = plan.record_bytes();
  const int64_t len = numel / 2, scales = ops::QuantScales(len, f);
  const auto* pa = sa.data_ptr<uint8_t>() + rec;
  const auto* pb = sb.data_ptr<uint8_t>() + rec;
  EXPECT_EQ(std::memcmp(pa + scales * 4, pb + scales * 4, static_cast<size_t>(len)), 0) << "payloads differ";
  for (int64_t i = 0; i < scales; ++i) {
    EXPECT_EQ(reinterpret_cast<const float*>(pa)[i] * 4, reinterpret_cast<const float*>(pb)[i]) << "scale " << i;
  }
}

// reset_T 2: the third reduction starts from zero errors again, so it sends
// exactly what a fresh buffer would; Clear does the same at once.
TEST(Qgz, ErrorFeedbackIsClearedEveryResetTReductions) {
  const int64_t numel = 4096;
  const ops::QuantFormat f{4, 2048};
  const at::Tensor g = Bucket(numel, 5);
  const QuantizedReduction plan(numel, 2, 0, f);
  auto send = [&](ErrorFeedback& fb) {
    at::Tensor s = at::empty({plan.wire_numel()}, at::TensorOptions().dtype(at::kByte));
    plan.QuantizeForPeers(g, s, &fb);
    return s;
  };
  ErrorFeedback fb(numel, 2, {0.5, 2});
  const at::Tensor first = send(fb);
  const at::Tensor second = send(fb);
  EXPECT_FALSE(at::equal(first, second)) << "the feedback changed nothing";
  EXPECT_TRUE(at::equal(send(fb), first)) << "reset_T 2: the third reduction must start afresh";
  // One reduction into the new period (reset_T not reached): only Clear can
  // make the next one start afresh.
  ErrorFeedback long_period(numel, 2, {0.5, 1000});
  (void)send(long_period);
  EXPECT_FALSE(at::equal(send(long_period), first));
  long_period.Clear();
  EXPECT_TRUE(at::equal(send(long_period), first)) << "Clear must forget the errors";
  EXPECT_GT(fb.bytes(), 0);
}

}  // namespace
}  // namespace zt::zero
