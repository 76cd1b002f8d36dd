// ParamSwapper's pool rules that the engine tests cannot pin down one by one:
// a read-ahead hint for a shard already in a buffer keeps it there (later
// read-aheads evict another copy), so do the copies a read-ahead is told to
// keep, an idle copy's write-back is waited for so its buffer can be read
// into, a reader shares a buffer with its write-back while a writer waits for
// it, and a write-back that failed where no caller was waiting is reported by
// the next Acquire, naming the shard, with the bytes kept. Every shard read
// back holds what was written.
#include "offload/param_swapper.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/offload/offload_test_util.h"
#include "tests/testing/scratch_dir.h"

namespace zt::offload {
namespace {

constexpr uint64_t kShard = 8192;  // bytes per slot: two O_DIRECT blocks

ParamSwapOptions Options(const std::string& dir, int slots, int buffers) {
  ParamSwapOptions o;
  o.dir = dir;
  for (int s = 0; s < slots; ++s) {
    o.slot_bytes.push_back(kShard);
    o.slot_names.push_back(absl::StrCat("shard ", s));
  }
  o.buffer_count = buffers;
  o.buffer_bytes = kShard;
  return o;
}

// Writes slot s's pattern through the pool (dirty release: asynchronous).
void Put(ParamSwapper& sw, int s) {
  auto buffer = sw.Acquire(s, ParamSwapper::Access::kOverwrite);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  testing::FillRandom(*buffer, kShard, static_cast<uint64_t>(s) + 1);
  ASSERT_TRUE(sw.Release(s, /*dirty=*/true).ok());
}

// Slot s holds its pattern (read from wherever it is now).
void Check(ParamSwapper& sw, int s) {
  auto buffer = sw.Acquire(s, ParamSwapper::Access::kUpdate);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  std::vector<unsigned char> want(kShard);
  testing::FillRandom(want.data(), kShard, static_cast<uint64_t>(s) + 1);
  EXPECT_EQ(testing::FirstMismatch(*buffer, want.data(), kShard), "") << "slot " << s;
  ASSERT_TRUE(sw.Release(s, /*dirty=*/false).ok());
}

TEST(ParamSwapper, ReadAheadKeepsACopyAlreadyHere) {
  zt::testing::ScratchDir dir("zt_param_swapper");
  ZT_ENGINE_OR_SKIP(io, IoOptions{});
  auto sw = ParamSwapper::Create(Options(dir.path(), 4, 3), io.get());
  ASSERT_TRUE(sw.ok()) << sw.status();
  // Slots 0-2 fill the pool; slot 3 then evicts the least recently used, 0
  // (waiting for its write-back if it still runs: the choice never depends
  // on which write the disk finishes first).
  for (int s = 0; s < 3; ++s) Put(**sw, s);
  Put(**sw, 3);
  ASSERT_TRUE((*sw)->Flush().ok());
  // Slots 1, 2, 3 are cached, 1 least recently used.
  ASSERT_FALSE((*sw)->resident(0));
  // The hint for 1 keeps it: the read of 0 takes 2's buffer, the next LRU.
  EXPECT_TRUE((*sw)->TryReadAhead(1));
  EXPECT_TRUE((*sw)->TryReadAhead(0));
  EXPECT_TRUE((*sw)->resident(1));
  EXPECT_FALSE((*sw)->resident(2));
  // Two of three buffers are reserved: no more hints are taken.
  EXPECT_FALSE((*sw)->TryReadAhead(2));
  const uint64_t reads = (*sw)->stats().reads;
  Check(**sw, 1);
  Check(**sw, 0);
  EXPECT_EQ((*sw)->stats().reads, reads) << "both came from the pool";
  Check(**sw, 2);
  Check(**sw, 3);
}

// The pool is registered with io_uring while the swapper lives: its
// transfers go through fixed buffers and move the same bytes.
TEST(ParamSwapper, ThePoolIsRegisteredWhileTheSwapperLives) {
  zt::testing::ScratchDir dir("zt_param_swapper");
  IoOptions options;
  options.backend = IoBackend::kUring;
  ZT_ENGINE_OR_SKIP(io, options);
  if (!testing::CanRegister(uint64_t{1} << 20)) GTEST_SKIP() << "the locked-memory limit is below 1 MiB here";
  auto sw = ParamSwapper::Create(Options(dir.path(), 6, 2), io.get());
  ASSERT_TRUE(sw.ok()) << sw.status();
  EXPECT_EQ(io->bytes_registered(), (*sw)->buffer_bytes());
  for (int s = 0; s < 6; ++s) Put(**sw, s);    // evicts: written back from the pool
  for (int s = 0; s < 6; ++s) Check(**sw, s);  // read back into it
  ASSERT_TRUE((*sw)->Flush().ok());
  EXPECT_GE(io->pieces_fixed(), 8u) << "4 evictions and 4 reads at least, each one piece";
  sw->reset();
  EXPECT_EQ(io->bytes_registered(), 0u) << "the pool's registration outlived it";
}

TEST(ParamSwapper, ReadAheadWaitsForAnIdleCopysWriteBack) {
  zt::testing::ScratchDir dir("zt_param_swapper");
  ZT_ENGINE_OR_SKIP(io, IoOptions{});
  auto sw = ParamSwapper::Create(Options(dir.path(), 3, 2), io.get());
  ASSERT_TRUE(sw.ok()) << sw.status();
  Put(**sw, 2);
  ASSERT_TRUE((*sw)->Flush().ok());
  Put(**sw, 0);
  Put(**sw, 1);  // both buffers now hold write-backs, perhaps still running
  EXPECT_TRUE((*sw)->TryReadAhead(2)) << "the least recently used copy's buffer, once written";
  EXPECT_FALSE((*sw)->resident(0));
  EXPECT_TRUE((*sw)->resident(1));
  Check(**sw, 2);
  Check(**sw, 0);
  Check(**sw, 1);
}

TEST(ParamSwapper, ReadAheadKeepsTheCopiesNeededSooner) {
  zt::testing::ScratchDir dir("zt_param_swapper");
  ZT_ENGINE_OR_SKIP(io, IoOptions{});
  auto sw = ParamSwapper::Create(Options(dir.path(), 4, 3), io.get());
  ASSERT_TRUE(sw.ok()) << sw.status();
  for (int s = 0; s < 4; ++s) Put(**sw, s);
  ASSERT_TRUE((*sw)->Flush().ok());
  // Slots 1, 2, 3 are idle copies, 1 least recently used; 0 is on disk.
  ASSERT_FALSE((*sw)->resident(0));
  EXPECT_FALSE((*sw)->TryReadAhead(0, {1, 2, 3})) << "every idle copy is needed sooner";
  EXPECT_TRUE((*sw)->TryReadAhead(0, {1, 3})) << "2 is not";
  EXPECT_TRUE((*sw)->resident(1));
  EXPECT_FALSE((*sw)->resident(2));
  EXPECT_TRUE((*sw)->resident(3));
  for (int s = 0; s < 4; ++s) Check(**sw, s);
}

// Writes of one slot held in the test hook until released (or 10 s later,
// so a broken swapper fails the test instead of hanging it).
class HeldWrites {
 public:
  IoOptions Options() {
    IoOptions o;
    o.inject_error = [this](bool write, uint64_t) {
      if (!write) return 0;
      std::unique_lock<std::mutex> lock(mu_);
      ++held_;
      cv_.notify_all();
      cv_.wait_for(lock, std::chrono::seconds(10), [this] { return released_; });
      return 0;
    };
    return o;
  }
  void WaitUntilHeld() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return held_ > 0; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  bool released() {
    std::lock_guard<std::mutex> lock(mu_);
    return released_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int held_ = 0;
  bool released_ = false;
};

TEST(ParamSwapper, AReaderSharesTheBufferWithItsWriteBackAWriterWaits) {
  zt::testing::ScratchDir dir("zt_param_swapper");
  HeldWrites held;
  IoOptions options = held.Options();
  options.block_size = kShard;  // one piece per write
  ZT_ENGINE_OR_SKIP(io, options);
  auto sw = ParamSwapper::Create(Options(dir.path(), 2, 2), io.get());
  ASSERT_TRUE(sw.ok()) << sw.status();
  Put(**sw, 0);  // its write-back is held
  held.WaitUntilHeld();
  // A gather's read: the bytes are current, the write may go on.
  auto reader = (*sw)->Acquire(0, ParamSwapper::Access::kRead);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_FALSE(held.released()) << "the reader waited for the write-back";
  std::vector<unsigned char> want(kShard);
  testing::FillRandom(want.data(), kShard, 1);
  EXPECT_EQ(testing::FirstMismatch(*reader, want.data(), kShard), "");
  ASSERT_TRUE((*sw)->Release(0, /*dirty=*/false).ok());
  // An update may change the bytes: it waits until the write has them.
  std::thread releaser([&held] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    held.Release();
  });
  auto writer = (*sw)->Acquire(0, ParamSwapper::Access::kUpdate);
  const bool released_first = held.released();
  releaser.join();
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_TRUE(released_first) << "the update did not wait for the write-back";
  ASSERT_TRUE((*sw)->Release(0, /*dirty=*/false).ok());
  Check(**sw, 0);
}

TEST(ParamSwapper, WriteFailureMetByReadAheadIsReportedByTheNextAcquire) {
  zt::testing::ScratchDir dir("zt_param_swapper");
  std::atomic<bool> fail{false};
  IoOptions options;
  options.inject_error = [&fail](bool write, uint64_t) { return write && fail.load() ? EIO : 0; };
  ZT_ENGINE_OR_SKIP(io, options);
  auto sw = ParamSwapper::Create(Options(dir.path(), 3, 2), io.get());
  ASSERT_TRUE(sw.ok()) << sw.status();
  Put(**sw, 2);
  ASSERT_TRUE((*sw)->Flush().ok());
  fail = true;
  Put(**sw, 0);
  Put(**sw, 1);
  // Both write-backs fail; neither buffer may be taken (the files are stale).
  EXPECT_FALSE((*sw)->TryReadAhead(2));
  EXPECT_TRUE((*sw)->resident(0));
  EXPECT_TRUE((*sw)->resident(1));
  auto again = (*sw)->Acquire(0, ParamSwapper::Access::kUpdate);
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(absl::StrContains(again.status().message(), "writing the parameters of shard ")) << again.status();
  // Reported once; the bytes written last are still what a read returns.
  fail = false;
  Check(**sw, 0);
  Check(**sw, 1);
}

}  // namespace
}  // namespace zt::offload
