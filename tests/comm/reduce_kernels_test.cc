// ReduceInto against the ATen reference (fp32 accumulation in source order)
// for every supported dtype and op, at counts that leave block tails, with
// dst aliasing a source, NaN propagation and integer wrap-around.
#include "comm/reduce_kernels.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "tests/comm/comm_test_util.h"

namespace {

using zt::comm::ReduceInto;
using zt::comm::ReduceOp;
using zt::comm::testing::AllInputs;
using zt::comm::testing::Compare;
using zt::comm::testing::ReferenceReduce;

std::vector<const void*> Pointers(const std::vector<at::Tensor>& ts) {
  std::vector<const void*> p;
  for (const auto& t : ts) p.push_back(t.data_ptr());
  return p;
}

TEST(ReduceInto, MatchesReferenceForEveryDtypeOpAndTail) {
  uint64_t seed = 0;
  for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf, at::kInt, at::kLong}) {
    for (int n : {1, 2, 3, 5}) {
      for (int64_t count : {0, 1, 511, 512, 513, 1500}) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
          if (op == ReduceOp::kAvg && !c10::isFloatingType(dtype)) continue;
          auto inputs = AllInputs(n, count, dtype, ++seed);
          at::Tensor out = at::empty({count}, inputs[0].options());
          ReduceInto(out.data_ptr(), Pointers(inputs), count, dtype, op, n);
          auto st = Compare(out, ReferenceReduce(inputs, op),
                            std::string(c10::toString(dtype)) + " " + zt::comm::ToString(op) +
                                " n=" + std::to_string(n) + " count=" + std::to_string(count));
          EXPECT_TRUE(st.ok()) << st;
        }
      }
    }
  }
}

TEST(ReduceInto, DestinationMayBeTheFirstSource) {
  auto inputs = AllInputs(3, 1000, at::kBFloat16, 42);
  at::Tensor want = ReferenceReduce(inputs, ReduceOp::kSum);
  ReduceInto(inputs[0].data_ptr(), Pointers(inputs), 1000, at::kBFloat16, ReduceOp::kSum, 3);
  auto st = Compare(inputs[0], want, "aliased bf16 sum");
  EXPECT_TRUE(st.ok()) << st;
}

TEST(ReduceInto, HalvesAccumulateInFloatAndRoundOnce) {
  // 256 + 1 + 1 in bf16: pairwise rounding gives 256 (1 is below half an ulp
  // of 256), fp32 accumulation gives 258.
  std::vector<at::Tensor> in = {at::full({4}, 256.0, at::kBFloat16), at::ones({4}, at::kBFloat16),
                                at::ones({4}, at::kBFloat16)};
  at::Tensor out = at::empty({4}, at::kBFloat16);
  ReduceInto(out.data_ptr(), Pointers(in), 4, at::kBFloat16, ReduceOp::kSum, 3);
  EXPECT_EQ(out[0].item<float>(), 258.0f);
}

TEST(ReduceInto, NanPropagatesThroughMaxAndMin) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<at::Tensor> in = {at::tensor({1.0f, nan, 3.0f}), at::tensor({nan, 2.0f, 1.0f})};
  for (ReduceOp op : {ReduceOp::kMax, ReduceOp::kMin}) {
    at::Tensor out = at::empty({3});
    ReduceInto(out.data_ptr(), Pointers(in), 3, at::kFloat, op, 2);
    EXPECT_TRUE(std::isnan(out[0].item<float>()));
    EXPECT_TRUE(std::isnan(out[1].item<float>()));
    EXPECT_EQ(out[2].item<float>(), op == ReduceOp::kMax ? 3.0f : 1.0f);
  }
}

TEST(ReduceInto, IntegerSumsWrap) {
  std::vector<at::Tensor> in = {at::tensor({std::numeric_limits<int32_t>::max()}, at::kInt), at::tensor({1}, at::kInt)};
  at::Tensor out = at::empty({1}, at::kInt);
  ReduceInto(out.data_ptr(), Pointers(in), 1, at::kInt, ReduceOp::kSum, 2);
  EXPECT_EQ(out.item<int32_t>(), std::numeric_limits<int32_t>::min());
}

TEST(ReduceInto, SupportedDtypes) {
  for (auto t : {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf, at::kInt, at::kLong}) {
    EXPECT_TRUE(zt::comm::IsReducibleDType(t));
  }
  for (auto t : {at::kBool, at::kByte, at::kChar, at::kShort, at::kComplexFloat}) {
    EXPECT_FALSE(zt::comm::IsReducibleDType(t));
  }
}

}  // namespace
