// lora/dense_linear.h: the one-row gemv path against torch::linear / addmm
// (the reference: what every row count took before), in both weight
// layouts, with and without bias, values and gradients. gemv and gemm sum
// the same products in another order: within a few ulps of the output's
// scale (1e-5 relative is far above that and far below a wrong layout,
// which is off by the output's whole size).
#include "lora/dense_linear.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace zt {
namespace {

TEST(DenseLinear, OneRowMatchesTheGemmPath) {
  torch::manual_seed(0);
  for (bool in_out : {false, true}) {
    for (bool with_bias : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "in_out " << in_out << " bias " << with_bias);
      const int64_t in = 96, out = 300;
      torch::Tensor w =
          torch::randn(in_out ? std::vector<int64_t>{in, out} : std::vector<int64_t>{out, in}).requires_grad_(true);
      torch::Tensor b = with_bias ? torch::randn({out}).requires_grad_(true) : torch::Tensor();
      for (const std::vector<int64_t>& shape :
           std::vector<std::vector<int64_t>>{{in}, {1, in}, {1, 1, in}, {3, 1, in}}) {
        torch::Tensor x = torch::randn(shape).requires_grad_(true);
        const torch::Tensor ref_w = in_out ? w.t() : w;
        torch::Tensor want = torch::linear(x, ref_w, b);
        torch::Tensor got = DenseLinear(x, w, b, in_out);
        ASSERT_EQ(got.sizes(), want.sizes());
        const double scale = want.abs().max().item<double>();
        EXPECT_LE((got - want).abs().max().item<double>(), 1e-5 * scale);
        auto gw = torch::autograd::grad({got.sum()}, {x, w});
        auto ww = torch::autograd::grad({want.sum()}, {x, w});
        EXPECT_LE((gw[0] - ww[0]).abs().max().item<double>(), 1e-5 * ww[0].abs().max().item<double>());
        EXPECT_LE((gw[1] - ww[1]).abs().max().item<double>(), 1e-5 * ww[1].abs().max().item<double>());
      }
    }
  }
}

}  // namespace
}  // namespace zt
