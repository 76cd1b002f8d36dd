// FreeStorage and StoragePool: views survive, memory really goes back, and
// the pool reuses buffers instead of allocating.
#include "zero/storage.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "engine/cpu_memory.h"

namespace zt::zero {
namespace {

TEST(StorageTest, ViewsSurviveAndMemoryReturns) {
  ASSERT_TRUE(InstallCountingCpuAllocator());
  const int64_t before = CpuMemory().current_bytes;
  torch::Tensor flat = torch::arange(1 << 16, torch::kFloat);
  torch::Tensor view = flat.narrow(0, 100, 64).view({8, 8});
  EXPECT_TRUE(HasStorage(flat));
  EXPECT_EQ(CpuMemory().current_bytes - before, 4 << 16);

  FreeStorage(flat);
  EXPECT_FALSE(HasStorage(flat));
  EXPECT_EQ(CpuMemory().current_bytes, before);
  EXPECT_EQ(view.sizes(), torch::IntArrayRef({8, 8}));  // metadata intact
  FreeStorage(flat);                                    // idempotent

  StoragePool pool;
  pool.Fill(flat);
  EXPECT_TRUE(HasStorage(flat));
  EXPECT_EQ(CpuMemory().current_bytes - before, 4 << 16);
  flat.copy_(torch::arange(1 << 16, torch::kFloat) * 2);
  EXPECT_EQ(view[0][0].item<float>(), 200.0f);  // the view reads the new bytes
  pool.Fill(flat);                              // idempotent
  EXPECT_EQ(CpuMemory().current_bytes - before, 4 << 16);

  pool.Drain(flat);
  EXPECT_FALSE(HasStorage(flat));
  EXPECT_EQ(pool.held_bytes(), 4 << 16);
  EXPECT_EQ(CpuMemory().current_bytes - before, 4 << 16);  // kept for the next Fill
  pool.Clear();
  EXPECT_EQ(pool.held_bytes(), 0);
  EXPECT_EQ(CpuMemory().current_bytes, before);
}

TEST(StorageTest, PoolReusesFittingBuffersOnly) {
  ASSERT_TRUE(InstallCountingCpuAllocator());
  const int64_t before = CpuMemory().current_bytes;
  StoragePool pool;
  torch::Tensor a = torch::empty({1000}, torch::kFloat);
  torch::Tensor b = torch::empty({600}, torch::kFloat);
  torch::Tensor tiny = torch::empty({100}, torch::kFloat);
  FreeStorage(b);
  FreeStorage(tiny);
  pool.Drain(a);  // a's 4000 bytes join the pool
  pool.Fill(b);   // 2400 bytes fit in 4000 (at most twice): reused, nothing allocated
  EXPECT_EQ(pool.held_bytes(), 0);
  EXPECT_EQ(CpuMemory().current_bytes - before, 4000);
  pool.Drain(b);  // the 4000-byte buffer returns, whole
  EXPECT_EQ(pool.held_bytes(), 4000);
  pool.Fill(tiny);  // 400 bytes would pin 4000: a fresh buffer instead
  EXPECT_EQ(pool.held_bytes(), 4000);
  EXPECT_EQ(CpuMemory().current_bytes - before, 4400);
  pool.Drain(tiny);
  pool.Clear();
  EXPECT_EQ(CpuMemory().current_bytes, before);
}

}  // namespace
}  // namespace zt::zero
