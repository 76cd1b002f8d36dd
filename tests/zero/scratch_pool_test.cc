// ScratchPool reuses buffers instead of reallocating them every step.
#include "zero/scratch_pool.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace zt::zero {
namespace {

TEST(ScratchPool, ReusesReleasedBuffers) {
  ScratchPool pool;
  auto f32 = torch::TensorOptions().dtype(torch::kFloat);
  at::Tensor a = pool.Acquire(100, f32, /*zeroed=*/true);
  EXPECT_EQ(a.numel(), 100);
  EXPECT_EQ(a.abs().sum().item<float>(), 0.0f);
  void* first = a.data_ptr();
  a.fill_(3.0f);
  pool.Release(a);
  at::Tensor b = pool.Acquire(60, f32, /*zeroed=*/true);  // fits in the released buffer
  EXPECT_EQ(b.data_ptr(), first);
  EXPECT_EQ(b.abs().sum().item<float>(), 0.0f);
  EXPECT_EQ(pool.held_bytes(), 400);
}

TEST(ScratchPool, GrowsOnlyToWhatIsInUseAtOnce) {
  ScratchPool pool;
  auto f32 = torch::TensorOptions().dtype(torch::kFloat);
  for (int step = 0; step < 10; ++step) {
    at::Tensor x = pool.Acquire(1000, f32, false);
    at::Tensor y = pool.Acquire(500, f32, false);
    EXPECT_NE(x.data_ptr(), y.data_ptr());
    pool.Release(x);
    pool.Release(y);
  }
  EXPECT_EQ(pool.held_bytes(), 1500 * 4);
  // A larger request regrows a free buffer instead of adding one.
  at::Tensor big = pool.Acquire(2000, f32, false);
  pool.Release(big);
  EXPECT_EQ(pool.held_bytes(), (2000 + 1000) * 4);
}

TEST(ScratchPool, KeepsDtypesApart) {
  ScratchPool pool;
  at::Tensor a = pool.Acquire(10, torch::TensorOptions().dtype(torch::kFloat), false);
  pool.Release(a);
  at::Tensor b = pool.Acquire(10, torch::TensorOptions().dtype(torch::kBFloat16), false);
  EXPECT_EQ(b.scalar_type(), torch::kBFloat16);
  EXPECT_NE(a.data_ptr(), b.data_ptr());
}

}  // namespace
}  // namespace zt::zero
