// ParamSwapper's pool rules that the engine tests cannot pin down one by one:
// a read-ahead hint for a shard already in a buffer keeps it there (later
// read-aheads evict another copy), a finished write-back frees its buffer
// for read-ahead without anyone waiting on it, and a write-back that failed
// where no caller was waiting is reported by the next Acquire, naming the
// shard, with the bytes kept. Every shard read back holds what was written.
#include "offload/param_swapper.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
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
  auto buffer = sw.Acquire(s, /*read=*/false);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  testing::FillRandom(*buffer, kShard, static_cast<uint64_t>(s) + 1);
  ASSERT_TRUE(sw.Release(s, /*dirty=*/true).ok());
}

// Slot s holds its pattern (read from wherever it is now).
void Check(ParamSwapper& sw, int s) {
  auto buffer = sw.Acquire(s, /*read=*/true);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  std::vector<unsigned char> want(kShard);
  testing::FillRandom(want.data(), kShard, static_cast<uint64_t>(s) + 1);
  EXPECT_EQ(testing::FirstMismatch(*buffer, want.data(), kShard), "") << "slot " << s;
  ASSERT_TRUE(sw.Release(s, /*dirty=*/false).ok());
}

// Retries TryReadAhead(s) until it succeeds or a second has passed: it
// depends on a write-back finishing, which it never waits for.
bool ReadAheadSoon(ParamSwapper& sw, int s) {
  const auto stop = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (std::chrono::steady_clock::now() < stop) {
    if (sw.TryReadAhead(s)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

TEST(ParamSwapper, ReadAheadKeepsACopyAlreadyHere) {
  zt::testing::ScratchDir dir("zt_param_swapper");
  ZT_ENGINE_OR_SKIP(io, IoOptions{});
  auto sw = ParamSwapper::Create(Options(dir.path(), 4, 3), io.get());
  ASSERT_TRUE(sw.ok()) << sw.status();
  // Slots 0-2 fill the pool, and their write-backs finish before slot 3
  // needs a buffer: 3 then evicts the least recently used, 0. (With the
  // write-backs still in flight, 3 would take whichever finished first, and
  // io_uring may finish 1's before 0's: this test failed once that way.)
  for (int s = 0; s < 3; ++s) Put(**sw, s);
  ASSERT_TRUE((*sw)->Flush().ok());
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

TEST(ParamSwapper, FinishedWriteBackFreesItsBufferForReadAhead) {
  zt::testing::ScratchDir dir("zt_param_swapper");
  ZT_ENGINE_OR_SKIP(io, IoOptions{});
  auto sw = ParamSwapper::Create(Options(dir.path(), 3, 2), io.get());
  ASSERT_TRUE(sw.ok()) << sw.status();
  Put(**sw, 2);
  ASSERT_TRUE((*sw)->Flush().ok());
  Put(**sw, 0);
  Put(**sw, 1);  // both buffers now hold write-backs
  EXPECT_TRUE(ReadAheadSoon(**sw, 2)) << "no buffer came free once the writes finished";
  Check(**sw, 2);
  Check(**sw, 0);
  Check(**sw, 1);
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
  EXPECT_FALSE(ReadAheadSoon(**sw, 2));
  EXPECT_TRUE((*sw)->resident(0));
  EXPECT_TRUE((*sw)->resident(1));
  auto again = (*sw)->Acquire(0, /*read=*/true);
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(absl::StrContains(again.status().message(), "writing the parameters of shard ")) << again.status();
  // Reported once; the bytes written last are still what a read returns.
  fail = false;
  Check(**sw, 0);
  Check(**sw, 1);
}

}  // namespace
}  // namespace zt::offload
