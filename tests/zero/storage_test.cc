// FreeStorage/AllocateStorage: views survive, memory really goes back.
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
  FreeStorage(flat);                                     // idempotent

  AllocateStorage(flat);
  EXPECT_TRUE(HasStorage(flat));
  EXPECT_EQ(CpuMemory().current_bytes - before, 4 << 16);
  flat.copy_(torch::arange(1 << 16, torch::kFloat) * 2);
  EXPECT_EQ(view[0][0].item<float>(), 200.0f);  // the view reads the new bytes
  AllocateStorage(flat);                         // idempotent
  EXPECT_EQ(CpuMemory().current_bytes - before, 4 << 16);
}

}  // namespace
}  // namespace zt::zero
