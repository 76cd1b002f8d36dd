// offload/aligned_buffer.h: alignment and rounding of AlignedBuffer, a clear
// error when memory runs out, and BufferPool's bounded, never-growing
// acquire/release bookkeeping (in_use, peak, double release aborts).
#include "offload/aligned_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>

#include "absl/strings/match.h"
#include "offload/io_engine.h"

namespace zt::offload {
namespace {

bool Aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kIoAlignment == 0; }

TEST(AlignedBuffer, RoundsUpAndAligns) {
  for (size_t bytes : {size_t{1}, size_t{4095}, size_t{4096}, size_t{4097}, size_t{1} << 20, (size_t{3} << 20) + 5}) {
    auto buffer = AlignedBuffer::Allocate(bytes);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    EXPECT_EQ(buffer->size(), AlignUp(bytes)) << bytes;
    EXPECT_TRUE(Aligned(buffer->data())) << bytes;
    EXPECT_FALSE(buffer->empty());
    std::memset(buffer->data(), 0xab, buffer->size());  // the whole rounded size is usable
  }
}

TEST(AlignedBuffer, ZeroBytesIsEmpty) {
  auto buffer = AlignedBuffer::Allocate(0);
  ASSERT_TRUE(buffer.ok());
  EXPECT_TRUE(buffer->empty());
  EXPECT_EQ(buffer->data(), nullptr);
  AlignedBuffer default_constructed;
  EXPECT_TRUE(default_constructed.empty());
}

TEST(AlignedBuffer, MovesOwnership) {
  auto buffer = AlignedBuffer::Allocate(8192);
  ASSERT_TRUE(buffer.ok());
  void* p = buffer->data();
  AlignedBuffer moved = std::move(buffer).value();
  EXPECT_EQ(moved.data(), p);
  EXPECT_EQ(moved.size(), 8192u);
}

TEST(AlignedBuffer, ImpossibleSizeIsResourceExhausted) {
  auto buffer = AlignedBuffer::Allocate(size_t{1} << 62);
  ASSERT_FALSE(buffer.ok());
  EXPECT_EQ(buffer.status().code(), absl::StatusCode::kResourceExhausted) << buffer.status();
  EXPECT_TRUE(absl::StrContains(buffer.status().message(), "EiB") ||
              absl::StrContains(buffer.status().message(), "PiB") ||
              absl::StrContains(buffer.status().message(), "4611686018427387904"))
      << buffer.status();
}

TEST(BufferPool, BoundedAcquireRelease) {
  auto pool_or = BufferPool::Create(3, 10000);
  ASSERT_TRUE(pool_or.ok()) << pool_or.status();
  BufferPool& pool = **pool_or;
  EXPECT_EQ(pool.count(), 3);
  EXPECT_EQ(pool.buffer_bytes(), 12288u);  // rounded up to kIoAlignment
  EXPECT_EQ(pool.total_bytes(), 3u * 12288u);

  std::set<int> got;
  for (int i = 0; i < 3; ++i) {
    int index = pool.TryAcquire();
    ASSERT_GE(index, 0);
    got.insert(index);
    EXPECT_TRUE(Aligned(pool.data(index)));
    std::memset(pool.data(index), i, pool.buffer_bytes());
  }
  EXPECT_EQ(got.size(), 3u);
  EXPECT_EQ(pool.TryAcquire(), -1) << "the pool must never grow";
  EXPECT_EQ(pool.in_use(), 3);
  EXPECT_EQ(pool.peak_in_use(), 3);

  // Buffers do not overlap: each still holds its own fill.
  for (int index : got) {
    const auto* p = static_cast<const unsigned char*>(pool.data(index));
    EXPECT_EQ(p[0], p[pool.buffer_bytes() - 1]);
  }
  EXPECT_NE(static_cast<const unsigned char*>(pool.data(0))[0], static_cast<const unsigned char*>(pool.data(1))[0]);

  pool.Release(1);
  EXPECT_EQ(pool.in_use(), 2);
  EXPECT_EQ(pool.TryAcquire(), 1);  // the one just released
  pool.Release(0);
  pool.Release(1);
  pool.Release(2);
  EXPECT_EQ(pool.in_use(), 0);
  EXPECT_EQ(pool.peak_in_use(), 3);
  EXPECT_EQ(pool.TryAcquire(), 2) << "most recently released first";
}

TEST(BufferPool, RejectsEmptyPools) {
  auto none = BufferPool::Create(0, 4096);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  auto tiny = BufferPool::Create(2, 0);
  ASSERT_FALSE(tiny.ok());
  EXPECT_EQ(tiny.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BufferPool, OutOfMemoryNamesTheBuffer) {
  auto pool = BufferPool::Create(2, size_t{1} << 62);
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kResourceExhausted) << pool.status();
  EXPECT_TRUE(absl::StrContains(pool.status().message(), "buffer 0")) << pool.status();
}

TEST(BufferPoolDeathTest, DoubleReleaseAborts) {
  auto pool = BufferPool::Create(2, 4096);
  ASSERT_TRUE(pool.ok());
  int index = (*pool)->TryAcquire();
  (*pool)->Release(index);
  EXPECT_DEATH((*pool)->Release(index), "released twice");
  EXPECT_DEATH((*pool)->Release(7), "releasing buffer 7");
}

}  // namespace
}  // namespace zt::offload
