// IoEngine's contract on both backends: option checks naming the aio keys,
// backend choice (ZT_AIO_BACKEND, and the fallback with its one-line warning
// when a seccomp filter refuses io_uring), hundreds of requests in flight,
// requests longer than every queue together, tickets, alignment errors that
// submit nothing, reads past the end, injected failures (EIO on the Nth
// piece, EAGAIN retried) and a real one (a file size limit in a child).
#include "offload/io_engine.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "offload/aligned_buffer.h"
#include "offload/io_engine_internal.h"
#include "offload/swap_file.h"
#include "tests/offload/offload_test_util.h"
#include "tests/testing/scratch_dir.h"

namespace zt::offload {
namespace {

using testing::ChildResult;
using testing::FillRandom;
using testing::FirstMismatch;
using testing::RandomRegions;
using testing::Region;
using testing::Report;
using testing::RunInChild;
using zt::testing::ScratchDir;

constexpr int kSkip = 77;

bool Contains(const absl::Status& s, const std::string& text) { return absl::StrContains(s.message(), text); }

// Restores ZT_AIO_BACKEND when a test that sets it ends.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      ::setenv(name_, old_.c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// ------------------------------------------------------------ options

TEST(IoOptions, OutOfRangeValuesNameTheAioKey) {
  struct Case {
    IoOptions options;
    const char* key;
  };
  std::vector<Case> cases;
  auto with = [](auto edit) {
    IoOptions o;
    o.backend = IoBackend::kThreads;
    edit(o);
    return o;
  };
  cases.push_back({with([](IoOptions& o) { o.block_size = 0; }), "aio.block_size"});
  cases.push_back({with([](IoOptions& o) { o.block_size = -4096; }), "aio.block_size"});
  cases.push_back({with([](IoOptions& o) { o.block_size = kMaxBlockSize + 1; }), "aio.block_size"});
  cases.push_back({with([](IoOptions& o) { o.queue_depth = 0; }), "aio.queue_depth"});
  cases.push_back({with([](IoOptions& o) { o.queue_depth = kMaxQueueDepth + 1; }), "aio.queue_depth"});
  cases.push_back({with([](IoOptions& o) { o.threads = 0; }), "aio.intra_op_parallelism"});
  cases.push_back({with([](IoOptions& o) { o.threads = kMaxIoThreads + 1; }), "aio.intra_op_parallelism"});
  for (const Case& c : cases) {
    auto io = IoEngine::Create(c.options);
    ASSERT_FALSE(io.ok()) << c.key;
    EXPECT_EQ(io.status().code(), absl::StatusCode::kInvalidArgument) << io.status();
    EXPECT_TRUE(Contains(io.status(), c.key)) << io.status();
  }
}

TEST(IoOptions, EffectiveOptionsRoundBlockSizeAndResolveBackend) {
  IoOptions o;
  o.block_size = 5000;
  o.backend = IoBackend::kThreads;
  auto io = IoEngine::Create(o);
  ASSERT_TRUE(io.ok()) << io.status();
  EXPECT_EQ((*io)->options().block_size, 8192);
  EXPECT_EQ((*io)->backend(), IoBackend::kThreads);
  EXPECT_EQ((*io)->options().backend, IoBackend::kThreads);
  EXPECT_STREQ(IoBackendName(IoBackend::kUring), "io_uring");
  EXPECT_STREQ(IoBackendName(IoBackend::kThreads), "threads");
  EXPECT_STREQ(IoBackendName(IoBackend::kAuto), "auto");
}

TEST(IoOptions, EnvironmentOverridesAuto) {
  {
    ScopedEnv env("ZT_AIO_BACKEND", "threads");
    auto io = IoEngine::Create({});
    ASSERT_TRUE(io.ok()) << io.status();
    EXPECT_EQ((*io)->backend(), IoBackend::kThreads);
    IoOptions explicit_uring;
    explicit_uring.backend = IoBackend::kUring;  // an explicit choice wins over the environment
    auto uring = IoEngine::Create(explicit_uring);
    if (uring.ok()) {
      EXPECT_EQ((*uring)->backend(), IoBackend::kUring);
    }
  }
  {
    ScopedEnv env("ZT_AIO_BACKEND", "uring");
    auto io = IoEngine::Create({});
    if (io.ok()) {
      EXPECT_EQ((*io)->backend(), IoBackend::kUring);
    } else {
      EXPECT_EQ(io.status().code(), absl::StatusCode::kUnavailable) << io.status();
      EXPECT_TRUE(Contains(io.status(), "ZT_AIO_BACKEND")) << io.status();
    }
  }
  {
    ScopedEnv env("ZT_AIO_BACKEND", "libaio");
    auto io = IoEngine::Create({});
    ASSERT_FALSE(io.ok());
    EXPECT_EQ(io.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(io.status(), "ZT_AIO_BACKEND='libaio'")) << io.status();
  }
}

TEST(IoErrors, SysErrorNamesTheSourceFileNotItsPath) {
  absl::Status s = internal::SysError(EIO, "/some/build/dir/offload/uring_engine.cc", 42, "io_uring_submit");
  EXPECT_EQ(s.message(), "io_uring_submit: Input/output error [uring_engine.cc:42]");
  EXPECT_EQ(s.code(), absl::ErrnoToStatusCode(EIO));
}

// ------------------------------------------------------------ per backend

class IoEngineTest : public ::testing::TestWithParam<IoBackend> {
 protected:
  IoOptions Options() const {
    IoOptions o;
    o.backend = GetParam();
    return o;
  }
  ScratchDir dir_{"zt_io"};
};

std::string BackendName(const ::testing::TestParamInfo<IoBackend>& info) {
  return info.param == IoBackend::kUring ? "uring" : "threads";
}

// Writes `bytes` of random data at `offset` and checks they read back.
void RoundTrip(IoEngine& io, const SwapFile& file, uint64_t offset, uint64_t bytes, uint64_t seed) {
  auto out = AlignedBuffer::Allocate(bytes);
  auto in = AlignedBuffer::Allocate(bytes);
  ASSERT_TRUE(out.ok() && in.ok());
  FillRandom(out->data(), bytes, seed);
  absl::Status w = io.WriteSync(file, offset, out->data(), bytes);
  ASSERT_TRUE(w.ok()) << w;
  absl::Status r = io.ReadSync(file, offset, in->data(), bytes);
  ASSERT_TRUE(r.ok()) << r;
  EXPECT_EQ(FirstMismatch(in->data(), out->data(), bytes, offset), "");
}

TEST_P(IoEngineTest, HundredsOfRequestsInFlight) {
  for (bool overlap : {true, false}) {
    IoOptions o = Options();
    o.threads = 2;
    o.queue_depth = 8;
    o.block_size = 16 << 10;
    o.overlap_events = overlap;
    ZT_ENGINE_OR_SKIP(io, o);
    std::mt19937_64 rng(overlap ? 1 : 2);
    uint64_t end = 0;
    std::vector<Region> regions = RandomRegions(rng, 64 << 10, ~uint64_t{0}, 600, &end);
    auto file = SwapFile::Create(dir_.path(), absl::StrCat("many", overlap, ".swp"), end);
    ASSERT_TRUE(file.ok()) << file.status();
    auto want = AlignedBuffer::Allocate(end);
    auto got = AlignedBuffer::Allocate(end);
    ASSERT_TRUE(want.ok() && got.ok());
    char* w = static_cast<char*>(want->data());
    char* g = static_cast<char*>(got->data());
    std::vector<IoTicket> tickets;
    for (const Region& r : regions) {
      FillRandom(w + r.offset, r.bytes, rng());
      tickets.push_back(io->Write(*file, r.offset, w + r.offset, r.bytes));
    }
    ASSERT_EQ(tickets.size(), 600u);  // all submitted before any is waited for
    std::shuffle(tickets.begin(), tickets.end(), rng);
    for (IoTicket t : tickets) {
      absl::Status s = io->Wait(t);
      ASSERT_TRUE(s.ok()) << s;
    }
    tickets.clear();
    for (const Region& r : regions) tickets.push_back(io->Read(*file, r.offset, g + r.offset, r.bytes));
    std::shuffle(tickets.begin(), tickets.end(), rng);
    for (IoTicket t : tickets) {
      absl::Status s = io->Wait(t);
      ASSERT_TRUE(s.ok()) << s;
    }
    for (const Region& r : regions) {
      ASSERT_EQ(FirstMismatch(g + r.offset, w + r.offset, r.bytes, r.offset), "");
    }
  }
}

// One request longer than block_size x queue_depth x threads, with a tail
// shorter than a block: the queues refill many times over.
TEST_P(IoEngineTest, RequestLongerThanEveryQueueTogether) {
  IoOptions o = Options();
  o.threads = 2;
  o.queue_depth = 2;
  o.block_size = 64 << 10;  // 256 KiB in flight at most
  ZT_ENGINE_OR_SKIP(io, o);
  const uint64_t bytes = (8 << 20) + 3 * kIoAlignment;
  auto file = SwapFile::Create(dir_.path(), "long.swp", bytes + (1 << 20));
  ASSERT_TRUE(file.ok()) << file.status();
  RoundTrip(*io, *file, 1 << 20, bytes, 11);
  EXPECT_EQ(io->bytes_written(), bytes);
  EXPECT_EQ(io->bytes_read(), bytes);
}

TEST_P(IoEngineTest, TicketsAndWaitAll) {
  ZT_ENGINE_OR_SKIP(io, Options());
  auto file = SwapFile::Create(dir_.path(), "t.swp", 1 << 20);
  ASSERT_TRUE(file.ok()) << file.status();
  auto buf = AlignedBuffer::Allocate(1 << 20);
  ASSERT_TRUE(buf.ok());
  EXPECT_EQ(io->Wait(0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(io->Wait(12345).code(), absl::StatusCode::kInvalidArgument);
  IoTicket a = io->Write(*file, 0, buf->data(), 4096);
  IoTicket b = io->Write(*file, 4096, buf->data(), 4096);
  EXPECT_NE(a, 0u);
  EXPECT_NE(a, b);
  EXPECT_TRUE(io->WaitAll().ok());
  EXPECT_TRUE(io->Wait(a).ok()) << "a ticket collected by WaitAll is done";
  EXPECT_TRUE(io->WaitAll().ok()) << "nothing outstanding";
  IoTicket empty = io->Read(*file, 0, buf->data(), 0);
  EXPECT_TRUE(io->Wait(empty).ok()) << "a zero-length request is a no-op";
  EXPECT_EQ(io->bytes_written(), 8192u);
}

// Misaligned buffers, offsets and lengths are refused before anything is
// submitted: the test hook (called before every piece) never runs and the
// file keeps its zeros.
TEST_P(IoEngineTest, AlignmentErrorsSubmitNothing) {
  std::atomic<int> hook_calls{0};
  IoOptions o = Options();
  o.inject_error = [&](bool, uint64_t) {
    ++hook_calls;
    return 0;
  };
  ZT_ENGINE_OR_SKIP(io, o);
  auto file = SwapFile::Create(dir_.path(), "align.swp", 1 << 20);
  ASSERT_TRUE(file.ok()) << file.status();
  auto buf = AlignedBuffer::Allocate(64 << 10);
  ASSERT_TRUE(buf.ok());
  std::memset(buf->data(), 0x77, buf->size());
  char* p = static_cast<char*>(buf->data());
  struct Bad {
    uint64_t offset;
    char* buffer;
    uint64_t bytes;
    const char* what;
  };
  for (const Bad& bad : {Bad{0, p + 512, 4096, "buffer"}, Bad{512, p, 4096, "offset"}, Bad{0, p, 1000, "length"},
                         Bad{4096, p + 8, 12288 + 8, "everything"}}) {
    absl::Status w = io->Wait(io->Write(*file, bad.offset, bad.buffer, bad.bytes));
    EXPECT_EQ(w.code(), absl::StatusCode::kInvalidArgument) << bad.what << ": " << w;
    EXPECT_TRUE(Contains(w, "multiples of 4096")) << w;
    EXPECT_TRUE(Contains(w, file->path())) << w;
    absl::Status r = io->Wait(io->Read(*file, bad.offset, bad.buffer, bad.bytes));
    EXPECT_EQ(r.code(), absl::StatusCode::kInvalidArgument) << bad.what << ": " << r;
  }
  absl::Status null_buffer = io->Wait(io->Write(*file, 0, nullptr, 4096));
  EXPECT_EQ(null_buffer.code(), absl::StatusCode::kInvalidArgument) << null_buffer;
  EXPECT_EQ(hook_calls.load(), 0);
  EXPECT_EQ(io->bytes_written(), 0u);
  EXPECT_EQ(io->bytes_read(), 0u);
  std::vector<char> plain(64 << 10);
  ASSERT_EQ(::pread(file->fd(), buf->data(), 64 << 10, 0), 64 << 10);
  EXPECT_EQ(FirstMismatch(buf->data(), std::vector<char>(64 << 10, 0).data(), 64 << 10), "");
}

TEST_P(IoEngineTest, PastTheReservedSizeIsOutOfRange) {
  std::atomic<int> hook_calls{0};
  IoOptions o = Options();
  o.inject_error = [&](bool, uint64_t) {
    ++hook_calls;
    return 0;
  };
  ZT_ENGINE_OR_SKIP(io, o);
  auto file = SwapFile::Create(dir_.path(), "small.swp", 1 << 20);
  ASSERT_TRUE(file.ok()) << file.status();
  auto buf = AlignedBuffer::Allocate(2 << 20);
  ASSERT_TRUE(buf.ok());
  absl::Status r = io->Wait(io->Read(*file, (1 << 20) - 4096, buf->data(), 8192));
  EXPECT_EQ(r.code(), absl::StatusCode::kOutOfRange) << r;
  EXPECT_TRUE(Contains(r, file->path())) << r;
  EXPECT_TRUE(Contains(r, "at offset 1044480")) << r;
  absl::Status w = io->Wait(io->Write(*file, 1 << 20, buf->data(), 4096));
  EXPECT_EQ(w.code(), absl::StatusCode::kOutOfRange) << w;
  EXPECT_TRUE(Contains(w, "may not grow")) << w;
  absl::Status huge = io->Wait(io->Read(*file, ~uint64_t{0} - 4095, buf->data(), 8192));  // no overflow
  EXPECT_EQ(huge.code(), absl::StatusCode::kOutOfRange) << huge;
  EXPECT_EQ(hook_calls.load(), 0);
}

// The real end of file, inside the reserved size (the file shrank under the
// engine): the backend meets EOF, after a short read for a straddling request.
TEST_P(IoEngineTest, ReadingPastTheEndOfTheFileIsACleanError) {
  IoOptions o = Options();
  o.block_size = 64 << 10;
  ZT_ENGINE_OR_SKIP(io, o);
  auto file = SwapFile::Create(dir_.path(), "shrunk.swp", 4 << 20);
  ASSERT_TRUE(file.ok()) << file.status();
  RoundTrip(*io, *file, 0, 1 << 20, 5);
  ASSERT_EQ(::ftruncate(file->fd(), 1 << 20), 0);
  auto buf = AlignedBuffer::Allocate(256 << 10);
  ASSERT_TRUE(buf.ok());
  // Straddling: the first 16 KiB of the piece come back, then EOF.
  absl::Status straddle = io->ReadSync(*file, (1 << 20) - (16 << 10), buf->data(), 64 << 10);
  EXPECT_EQ(straddle.code(), absl::StatusCode::kOutOfRange) << straddle;
  EXPECT_TRUE(Contains(straddle, "end of file")) << straddle;
  EXPECT_TRUE(Contains(straddle, file->path())) << straddle;
  EXPECT_TRUE(Contains(straddle, "at offset 1048576")) << straddle;
  // Entirely past the end: several pieces, each at EOF at once.
  absl::Status beyond = io->ReadSync(*file, 2 << 20, buf->data(), 256 << 10);
  EXPECT_EQ(beyond.code(), absl::StatusCode::kOutOfRange) << beyond;
  EXPECT_TRUE(Contains(beyond, "end of file")) << beyond;
  // Still usable.
  RoundTrip(*io, *file, 0, 512 << 10, 6);
}

// An EIO injected into the Nth piece of one request fails that request only,
// with the file and the piece's offset in the message; the request's other
// pieces still land, the other requests are untouched, and the engine keeps
// working.
TEST_P(IoEngineTest, InjectedEioOnTheNthPiece) {
  for (int threads : {1, 3}) {
    for (bool overlap : {true, false}) {
      SCOPED_TRACE(absl::StrCat("threads=", threads, " overlap_events=", overlap));
      const uint64_t piece = 64 << 10;
      const uint64_t a_offset = 0, a_bytes = 16 * piece;  // request A: 16 pieces
      const uint64_t b_offset = a_bytes, b_bytes = 4 * piece;
      const uint64_t c_offset = b_offset + b_bytes, c_bytes = 3 * piece + kIoAlignment;
      std::atomic<int> a_pieces{0};
      std::atomic<uint64_t> failed_offset{~uint64_t{0}};
      IoOptions o = Options();
      o.threads = threads;
      o.queue_depth = 4;
      o.block_size = static_cast<int64_t>(piece);
      o.overlap_events = overlap;
      o.inject_error = [&](bool write, uint64_t offset) {
        if (!write || offset >= a_offset + a_bytes) return 0;
        if (++a_pieces == 5) {
          failed_offset = offset;
          return EIO;
        }
        return 0;
      };
      ZT_ENGINE_OR_SKIP(io, o);
      auto file = SwapFile::Create(dir_.path(), absl::StrCat("eio", threads, overlap, ".swp"), 2 << 20);
      ASSERT_TRUE(file.ok()) << file.status();
      const uint64_t total = c_offset + c_bytes;
      auto want = AlignedBuffer::Allocate(total);
      auto got = AlignedBuffer::Allocate(total);
      ASSERT_TRUE(want.ok() && got.ok());
      char* w = static_cast<char*>(want->data());
      char* g = static_cast<char*>(got->data());
      FillRandom(w, total, 99);

      IoTicket a = io->Write(*file, a_offset, w + a_offset, a_bytes);
      IoTicket b = io->Write(*file, b_offset, w + b_offset, b_bytes);
      IoTicket c = io->Write(*file, c_offset, w + c_offset, c_bytes);
      absl::Status sc = io->Wait(c);  // out of order on purpose
      absl::Status sa = io->Wait(a);
      absl::Status sb = io->Wait(b);
      EXPECT_TRUE(sb.ok()) << sb;
      EXPECT_TRUE(sc.ok()) << sc;
      ASSERT_FALSE(sa.ok());
      ASSERT_NE(failed_offset.load(), ~uint64_t{0});
      EXPECT_EQ(sa.code(), absl::StatusCode::kDataLoss) << sa;
      EXPECT_TRUE(Contains(sa, "Input/output error")) << sa;
      EXPECT_TRUE(Contains(sa, file->path())) << sa;
      EXPECT_TRUE(Contains(sa, absl::StrCat("at offset ", failed_offset.load(), " "))) << sa;
      EXPECT_TRUE(Contains(sa, GetParam() == IoBackend::kUring ? "io_uring write" : "pwrite")) << sa;
      EXPECT_EQ(a_pieces.load(), 16) << "every piece of the failed request was still attempted";

      // Everything but the failed piece is on disk.
      ASSERT_TRUE(io->ReadSync(*file, 0, g, total).ok());
      for (uint64_t at = 0; at < total; at += piece) {
        const uint64_t n = std::min(piece, total - at);
        if (at == failed_offset.load()) continue;
        ASSERT_EQ(FirstMismatch(g + at, w + at, n, at), "");
      }
      EXPECT_EQ(io->bytes_written(), total - piece);
      // Usable afterwards (the hook only fires once).
      RoundTrip(*io, *file, 1 << 20, 512 << 10, 7);
    }
  }
}

TEST_P(IoEngineTest, WaitAllReportsTheLowestFailedTicket) {
  IoOptions o = Options();
  o.block_size = 4096;
  o.inject_error = [](bool write, uint64_t offset) {
    return write && (offset == 8192 || offset == 16384) ? ENOSPC : 0;
  };
  ZT_ENGINE_OR_SKIP(io, o);
  auto file = SwapFile::Create(dir_.path(), "all.swp", 1 << 20);
  ASSERT_TRUE(file.ok()) << file.status();
  auto buf = AlignedBuffer::Allocate(32 << 10);
  ASSERT_TRUE(buf.ok());
  char* p = static_cast<char*>(buf->data());
  for (uint64_t at = 0; at < (32 << 10); at += 4096) io->Write(*file, at, p + at, 4096);
  absl::Status s = io->WaitAll();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_TRUE(Contains(s, "at offset 8192 ")) << s;
  EXPECT_TRUE(io->WaitAll().ok());
}

// An EAGAIN (the device asking to try later) is retried, not reported.
TEST_P(IoEngineTest, InjectedEagainIsRetried) {
  std::atomic<int> calls{0};
  IoOptions o = Options();
  o.block_size = 64 << 10;
  o.inject_error = [&](bool, uint64_t) { return ++calls == 2 ? EAGAIN : 0; };
  ZT_ENGINE_OR_SKIP(io, o);
  auto file = SwapFile::Create(dir_.path(), "again.swp", 1 << 20);
  ASSERT_TRUE(file.ok()) << file.status();
  RoundTrip(*io, *file, 0, 1 << 20, 3);
  EXPECT_GE(calls.load(), 32);  // 16 pieces each way; the retried one is not asked again
}

// The order pieces start in, seen through the test hook with one worker and
// one piece in flight: while the first piece of a background write is held
// in the hook, a second background write, an urgent read and a third
// background write queue up. Urgent goes first, then each class in
// submission order; Hurry moves a request ahead of everything queued (the
// latest hurried first), and Wait hurries the request it waits for.
TEST_P(IoEngineTest, UrgentAndHurriedRequestsStartFirst) {
  constexpr uint64_t kBlock = 4096;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<uint64_t> started;  // piece offsets in start order; guarded by mu
  bool release = false;           // guarded by mu
  IoOptions o = Options();
  o.threads = 1;
  o.queue_depth = 1;
  o.block_size = kBlock;
  o.inject_error = [&](bool, uint64_t offset) {
    std::unique_lock<std::mutex> lock(mu);
    started.push_back(offset);
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    return 0;
  };
  ZT_ENGINE_OR_SKIP(io, o);
  auto file = SwapFile::Create(dir_.path(), "order.swp", 64 * kBlock);
  ASSERT_TRUE(file.ok()) << file.status();
  auto buf = AlignedBuffer::Allocate(64 * kBlock);
  ASSERT_TRUE(buf.ok());
  char* b = static_cast<char*>(buf->data());
  // Requests at 16-block strides, so a piece's offset names its request.
  auto request = [&](int index, int pieces, bool write, IoPriority priority) {
    const uint64_t at = static_cast<uint64_t>(index) * 16 * kBlock;
    return write ? io->Write(*file, at, b + at, pieces * kBlock, priority)
                 : io->Read(*file, at, b + at, pieces * kBlock, priority);
  };
  auto which = [&](uint64_t offset) { return static_cast<int>(offset / (16 * kBlock)); };

  const IoTicket first = request(0, 3, /*write=*/true, IoPriority::kBackground);
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return !started.empty(); });  // its first piece is held
  }
  const IoTicket second = request(1, 2, /*write=*/true, IoPriority::kBackground);
  const IoTicket urgent = request(2, 2, /*write=*/false, IoPriority::kUrgent);
  const IoTicket third = request(3, 2, /*write=*/true, IoPriority::kBackground);
  EXPECT_EQ(io->requests_hurried(), 0u);
  io->Hurry(third);
  EXPECT_EQ(io->requests_hurried(), 1u);
  io->Hurry(third);  // already next: nothing changes place
  EXPECT_EQ(io->requests_hurried(), 1u);
  io->Hurry(first);  // the latest hurried goes first
  EXPECT_EQ(io->requests_hurried(), 2u);

  // Wait hurries the second request (on another thread: the hook holds the
  // worker until it is released); seen through the counter, then released.
  absl::Status waited;
  std::thread waiter([&] { waited = io->Wait(second); });
  while (io->requests_hurried() < 3) std::this_thread::yield();
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  waiter.join();
  EXPECT_TRUE(waited.ok()) << waited;
  ASSERT_TRUE(io->WaitAll().ok());
  EXPECT_TRUE(io->Wait(urgent).ok());

  std::vector<int> order;
  for (uint64_t offset : started) order.push_back(which(offset));
  EXPECT_EQ(order, (std::vector<int>{0, 1, 1, 0, 0, 3, 3, 2, 2}));
}

// Destroying the engine waits for transfers in flight: what was submitted is
// on disk afterwards, and the buffers were not used after the destructor.
TEST_P(IoEngineTest, DestructionFinishesInFlightWrites) {
  auto file = SwapFile::Create(dir_.path(), "dtor.swp", 8 << 20);
  ASSERT_TRUE(file.ok()) << file.status();
  auto want = AlignedBuffer::Allocate(8 << 20);
  ASSERT_TRUE(want.ok());
  FillRandom(want->data(), 8 << 20, 21);
  {
    IoOptions o = Options();
    o.block_size = 128 << 10;
    ZT_ENGINE_OR_SKIP(io, o);
    for (uint64_t at = 0; at < (8 << 20); at += 1 << 20) {
      io->Write(*file, at, static_cast<char*>(want->data()) + at, 1 << 20);
    }
  }  // no Wait
  ZT_ENGINE_OR_SKIP(io, Options());
  auto got = AlignedBuffer::Allocate(8 << 20);
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(io->ReadSync(*file, 0, got->data(), 8 << 20).ok());
  EXPECT_EQ(FirstMismatch(got->data(), want->data(), 8 << 20), "");
}

TEST_P(IoEngineTest, MovedFromFileIsRefused) {
  ZT_ENGINE_OR_SKIP(io, Options());
  auto file = SwapFile::Create(dir_.path(), "moved.swp", 1 << 20);
  ASSERT_TRUE(file.ok()) << file.status();
  SwapFile taken = std::move(file).value();
  auto buf = AlignedBuffer::Allocate(4096);
  ASSERT_TRUE(buf.ok());
  absl::Status s = io->ReadSync(*file, 0, buf->data(), 4096);  // use after move, on purpose
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(io->ReadSync(taken, 0, buf->data(), 4096).ok());
}

// A real failure mid-request: a file size limit (RLIMIT_FSIZE, in a child
// so it does not leak) below the end of an 8 MiB write. The piece crossing
// the limit is cut short, its remainder fails with EFBIG, the pieces beyond
// fail too; the message is clean, the data below the limit is intact and the
// engine still works.
TEST_P(IoEngineTest, FileSizeLimitFailsTheWriteCleanly) {
  const IoBackend backend = GetParam();
  const std::string dir = dir_.path();
  const uint64_t limit = (4 << 20) + (512 << 10);
  ChildResult child = RunInChild([&](int report) {
    auto file = SwapFile::Create(dir, "limited.swp", 8 << 20);  // reserved before the limit
    if (!file.ok()) {
      Report(report, std::string(file.status().message()));
      return 2;
    }
    IoOptions o;
    o.backend = backend;
    o.threads = 2;
    o.block_size = 1 << 20;
    auto io = IoEngine::Create(o);
    if (!io.ok()) {
      Report(report, std::string(io.status().message()));
      return io.status().code() == absl::StatusCode::kUnavailable ? kSkip : 3;
    }
    std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {limit, limit};
    if (::setrlimit(RLIMIT_FSIZE, &rl) != 0) return 4;
    auto data = AlignedBuffer::Allocate(8 << 20);
    auto back = AlignedBuffer::Allocate(8 << 20);
    if (!data.ok() || !back.ok()) return 5;
    FillRandom(data->data(), 8 << 20, 77);
    absl::Status s = (*io)->WriteSync(*file, 0, data->data(), 8 << 20);
    if (s.ok()) return 1;
    Report(report, absl::StrCat(absl::StatusCodeToString(s.code()), ": ", s.message(), "\n"));
    // One piece straddling the limit: the kernel writes up to it and returns
    // short, and only the remainder's resubmission meets EFBIG. Treating the
    // short write as done would report success here.
    absl::Status straddle = (*io)->WriteSync(*file, 4 << 20, data->data(), 1 << 20);
    if (straddle.ok()) return 9;
    Report(report, absl::StrCat("straddle: ", straddle.message(), "\n"));
    if (!(*io)->ReadSync(*file, 0, back->data(), 4 << 20).ok()) return 6;
    if (std::memcmp(back->data(), data->data(), 4 << 20) != 0) return 7;
    if (!(*io)->WriteSync(*file, 0, back->data(), 1 << 20).ok()) return 8;
    return 0;
  });
  if (child.exit_code == kSkip) GTEST_SKIP() << child.output;
  ASSERT_EQ(child.exit_code, 0) << "1: the write succeeded; 6/7: data below the limit lost; 8: engine unusable; "
                                   "9: a short write reported as success; "
                                << child.output;
  EXPECT_TRUE(absl::StrContains(child.output,
                                absl::StrCat("straddle: ", backend == IoBackend::kUring ? "io_uring write" : "pwrite",
                                             " of 524288 bytes at offset ", limit, " ")))
      << "the remainder after the short write fails, named with its own offset and length: " << child.output;
  EXPECT_TRUE(absl::StartsWith(child.output, "RESOURCE_EXHAUSTED: ")) << child.output;
  EXPECT_TRUE(absl::StrContains(child.output, "File too large")) << child.output;
  EXPECT_TRUE(absl::StrContains(child.output, dir + "/limited.swp")) << child.output;
  EXPECT_TRUE(absl::StrContains(child.output, backend == IoBackend::kUring ? "io_uring write" : "pwrite"))
      << child.output;
  bool names_offset = false;
  for (uint64_t at : {limit, uint64_t{5} << 20, uint64_t{6} << 20, uint64_t{7} << 20}) {
    names_offset |= absl::StrContains(child.output, absl::StrCat("at offset ", at, " "));
  }
  EXPECT_TRUE(names_offset) << "the failing offset, at or beyond the limit: " << child.output;
}

// ------------------------------------------------------------ fixed buffers

// Half of a buffer registered: pieces inside it go through the fixed buffer,
// pieces outside it or straddling its end pin their pages as before, and
// every byte arrives either way. The threads backend registers nothing.
TEST_P(IoEngineTest, RegisteredMemoryMovesTheSameBytes) {
  IoOptions o = Options();
  o.threads = 2;
  o.block_size = 64 << 10;
  ZT_ENGINE_OR_SKIP(io, o);
  constexpr uint64_t kBytes = 1 << 20;
  constexpr uint64_t kHalf = kBytes / 2;
  auto file = SwapFile::Create(dir_.path(), "fixed.swp", kBytes);
  auto out = AlignedBuffer::Allocate(kBytes);
  auto in = AlignedBuffer::Allocate(kBytes);
  ASSERT_TRUE(file.ok() && out.ok() && in.ok());
  char* w = static_cast<char*>(out->data());
  char* g = static_cast<char*>(in->data());
  const bool uring = GetParam() == IoBackend::kUring;
  if (uring && !testing::CanRegister(3 * kBytes)) GTEST_SKIP() << "the locked-memory limit is below 3 MiB here";
  IoRegistration out_half = io->Register(w, kHalf);
  IoRegistration in_all = io->Register(g, kBytes);
  EXPECT_EQ(out_half.fixed(), uring);
  EXPECT_EQ(in_all.fixed(), uring);
  EXPECT_EQ(io->bytes_registered(), uring ? kHalf + kBytes : 0);

  FillRandom(w, kBytes, 11);
  ASSERT_TRUE(io->WriteSync(*file, 0, w, kBytes).ok());  // 16 pieces, the first 8 in the registered half
  EXPECT_EQ(io->pieces_fixed(), uring ? 8u : 0u);
  // 480-544 KiB straddles the registered half's end: that piece pins its pages.
  FillRandom(w + (480 << 10), 128 << 10, 12);
  ASSERT_TRUE(io->WriteSync(*file, 480 << 10, w + (480 << 10), 128 << 10).ok());
  EXPECT_EQ(io->pieces_fixed(), uring ? 8u : 0u);
  ASSERT_TRUE(io->ReadSync(*file, 0, g, kBytes).ok());  // all 16 into a registered buffer
  EXPECT_EQ(io->pieces_fixed(), uring ? 24u : 0u);
  EXPECT_EQ(FirstMismatch(g, w, kBytes), "");

  // Short reads resubmit their remainder inside the same fixed buffer: the
  // file ends 4 KiB into the last piece, so that piece reads short.
  auto tail = SwapFile::Create(dir_.path(), "tail.swp", kBytes);
  ASSERT_TRUE(tail.ok());
  ASSERT_TRUE(io->WriteSync(*tail, 0, w, kBytes).ok());
  ASSERT_EQ(::ftruncate(tail->fd(), kBytes - 4096), 0);
  std::memset(g, 0, kBytes);
  absl::Status past = io->ReadSync(*tail, 0, g, kBytes);
  EXPECT_EQ(past.code(), absl::StatusCode::kOutOfRange) << past;
  EXPECT_EQ(FirstMismatch(g, w, kBytes - 4096), "");

  out_half.Reset();
  EXPECT_FALSE(out_half.fixed());
  EXPECT_EQ(io->bytes_registered(), uring ? kBytes : 0);
  in_all = IoRegistration();  // move-assigning unregisters the old one
  EXPECT_EQ(io->bytes_registered(), 0u);
  const uint64_t before = io->pieces_fixed();
  ASSERT_TRUE(io->ReadSync(*file, 0, g, kBytes).ok());
  EXPECT_EQ(io->pieces_fixed(), before) << "unregistered memory used as a fixed buffer";
  EXPECT_EQ(FirstMismatch(g, w, kBytes), "");
}

// Memory unmapped and mapped again at the same address after its
// registration ended. Unregistered, the new pages must be transferred as
// plain memory: an engine still mapping the address to the old entry would
// read into the old pages (or fail) and leave these untouched. Registered
// again, the reused entry must name the new pages.
TEST_P(IoEngineTest, ReregisteredAddressGetsTheNewPages) {
  IoOptions o = Options();
  o.block_size = 64 << 10;
  ZT_ENGINE_OR_SKIP(io, o);
  constexpr size_t kBytes = 256 << 10;
  if (!testing::CanRegister(2 * kBytes)) GTEST_SKIP() << "the locked-memory limit is below 512 KiB here";
  const bool uring = GetParam() == IoBackend::kUring;
  auto file = SwapFile::Create(dir_.path(), "again.swp", kBytes);
  auto want = AlignedBuffer::Allocate(kBytes);
  ASSERT_TRUE(file.ok() && want.ok());
  FillRandom(want->data(), kBytes, 21);
  ASSERT_TRUE(io->WriteSync(*file, 0, want->data(), kBytes).ok());

  void* first = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(first, MAP_FAILED);
  {
    IoRegistration r = io->Register(first, kBytes);
    ASSERT_TRUE(io->ReadSync(*file, 0, first, kBytes).ok());
    EXPECT_EQ(FirstMismatch(first, want->data(), kBytes), "");
    EXPECT_EQ(io->pieces_fixed(), uring ? 4u : 0u);
  }
  ASSERT_EQ(::munmap(first, kBytes), 0);
  void* second = ::mmap(first, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  ASSERT_EQ(second, first);

  absl::Status plain = io->ReadSync(*file, 0, second, kBytes);
  ASSERT_TRUE(plain.ok()) << plain;
  EXPECT_EQ(io->pieces_fixed(), uring ? 4u : 0u) << "the address still maps to the ended registration";
  EXPECT_EQ(FirstMismatch(second, want->data(), kBytes), "");

  std::memset(second, 0, kBytes);
  IoRegistration r = io->Register(second, kBytes);
  ASSERT_TRUE(io->ReadSync(*file, 0, second, kBytes).ok());
  EXPECT_EQ(io->pieces_fixed(), uring ? 8u : 0u);
  EXPECT_EQ(FirstMismatch(second, want->data(), kBytes), "");
  r.Reset();
  ASSERT_EQ(::munmap(second, kBytes), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, IoEngineTest, ::testing::Values(IoBackend::kUring, IoBackend::kThreads),
                         BackendName);

// ------------------------------------------------------------ fallback

// Points this (forked) process's stderr at `path`, where the engine logs.
bool StderrTo(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  return fd >= 0 && ::dup2(fd, 2) >= 0;
}

// The non-empty lines of a child's log.
std::vector<std::string> LogLines(const std::string& log) { return absl::StrSplit(log, '\n', absl::SkipEmpty()); }

// A seccomp filter that makes io_uring_setup fail with EPERM, the way
// container runtimes refuse io_uring. False where it cannot be installed.
bool RefuseIoUringSetup() {
#if defined(__x86_64__)
  constexpr uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  constexpr uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
  return false;
#endif
#if defined(__x86_64__) || defined(__aarch64__)
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog program = {static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  return ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
#endif
}

TEST(IoFallback, RefusedIoUringFallsBackToThreadsWithOneWarning) {
  {
    IoOptions uring;
    uring.backend = IoBackend::kUring;
    auto io = IoEngine::Create(uring);
    if (!io.ok()) GTEST_SKIP() << "io_uring is unavailable here even without a filter: " << io.status();
  }
  ScratchDir dir("zt_io");
  const std::string log_path = dir.File("stderr.txt");
  const std::string swap_dir = dir.path();
  ChildResult child = RunInChild([&](int report) {
    if (!RefuseIoUringSetup()) {
      Report(report, "cannot install a seccomp filter here");
      return kSkip;
    }
    ::unsetenv("ZT_AIO_BACKEND");
    if (!StderrTo(log_path)) return 2;
    IoOptions explicit_uring;
    explicit_uring.backend = IoBackend::kUring;
    auto refused = IoEngine::Create(explicit_uring);
    if (refused.ok() || refused.status().code() != absl::StatusCode::kUnavailable) return 3;
    auto io = IoEngine::Create({});
    auto again = IoEngine::Create({});  // the warning is printed once per process
    if (!io.ok() || !again.ok()) return 4;
    if ((*io)->backend() != IoBackend::kThreads) return 5;
    auto file = SwapFile::Create(swap_dir, "fallback.swp", 1 << 20);
    auto out = AlignedBuffer::Allocate(1 << 20);
    auto in = AlignedBuffer::Allocate(1 << 20);
    if (!file.ok() || !out.ok() || !in.ok()) return 6;
    FillRandom(out->data(), 1 << 20, 5);
    if (!(*io)->WriteSync(*file, 0, out->data(), 1 << 20).ok()) return 7;
    if (!(*io)->ReadSync(*file, 0, in->data(), 1 << 20).ok()) return 7;
    if (std::memcmp(in->data(), out->data(), 1 << 20) != 0) return 8;
    Report(report, std::string(refused.status().message()));
    return 0;
  });
  if (child.exit_code == kSkip) GTEST_SKIP() << child.output;
  ASSERT_EQ(child.exit_code, 0) << "3: explicit io_uring not Unavailable; 5: no fallback; 7/8: I/O failed";
  EXPECT_TRUE(absl::StrContains(child.output, "Operation not permitted")) << child.output;
  EXPECT_TRUE(absl::StrContains(child.output, "io_uring is disabled")) << child.output;
  const std::string log = zt::testing::ReadFileBytes(log_path);
  const std::vector<std::string> lines = LogLines(log);
  ASSERT_EQ(lines.size(), 1u) << log;
  EXPECT_TRUE(absl::StrContains(lines[0], "WARNING")) << log;
  EXPECT_TRUE(absl::StrContains(lines[0], "io_uring unavailable")) << log;
  EXPECT_TRUE(absl::StrContains(lines[0], "Operation not permitted")) << log;
  EXPECT_TRUE(absl::StrContains(lines[0], "ZT_AIO_BACKEND=threads")) << log;
}

// Without CAP_IPC_LOCK and with a locked-memory limit below the buffer,
// io_uring refuses the registration: the handle is empty, transfers work
// unregistered, and one warning names the limit and what to change.
TEST(IoFixedBuffers, MemlockRefusalRunsUnregisteredWithOneWarning) {
  ScratchDir dir("zt_io");
  const std::string log_path = dir.File("stderr.txt");
  const std::string swap_dir = dir.path();
  ChildResult child = RunInChild([&](int report) {
    if (!testing::DropIpcLock()) {
      Report(report, "cannot drop CAP_IPC_LOCK here");
      return kSkip;
    }
    struct rlimit rl = {64 << 10, 64 << 10};
    if (::setrlimit(RLIMIT_MEMLOCK, &rl) != 0) return 2;
    if (!StderrTo(log_path)) return 3;
    IoOptions o;
    o.backend = IoBackend::kUring;
    o.block_size = 64 << 10;
    auto io = IoEngine::Create(o);
    if (!io.ok()) {
      Report(report, std::string(io.status().message()));
      return io.status().code() == absl::StatusCode::kUnavailable ? kSkip : 4;
    }
    auto file = SwapFile::Create(swap_dir, "refused.swp", 1 << 20);
    auto out = AlignedBuffer::Allocate(1 << 20);
    auto in = AlignedBuffer::Allocate(1 << 20);
    if (!file.ok() || !out.ok() || !in.ok()) return 5;
    IoRegistration a = (*io)->Register(out->data(), 1 << 20);
    IoRegistration b = (*io)->Register(in->data(), 1 << 20);  // refused too, not logged again
    if (a.fixed() || b.fixed() || (*io)->bytes_registered() != 0) return 6;
    FillRandom(out->data(), 1 << 20, 31);
    if (!(*io)->WriteSync(*file, 0, out->data(), 1 << 20).ok()) return 7;
    if (!(*io)->ReadSync(*file, 0, in->data(), 1 << 20).ok()) return 7;
    if (std::memcmp(in->data(), out->data(), 1 << 20) != 0) return 8;
    if ((*io)->pieces_fixed() != 0) return 9;
    // A registration that fits the limit still works after a refusal.
    auto small = AlignedBuffer::Allocate(16 << 10);
    if (!small.ok()) return 5;
    IoRegistration c = (*io)->Register(small->data(), 16 << 10);
    if (!c.fixed()) return 10;
    return 0;
  });
  if (child.exit_code == kSkip) GTEST_SKIP() << child.output;
  ASSERT_EQ(child.exit_code, 0) << "6: registered beyond the limit; 7/8: transfers failed; 9: fixed pieces counted; "
                                   "10: a registration within the limit refused"
                                << child.output;
  const std::string log = zt::testing::ReadFileBytes(log_path);
  const std::vector<std::string> lines = LogLines(log);
  ASSERT_EQ(lines.size(), 1u) << log;
  EXPECT_TRUE(absl::StrContains(lines[0], "WARNING")) << log;
  EXPECT_TRUE(absl::StrContains(lines[0], "could not register 1 MiB of swap buffers")) << log;
  EXPECT_TRUE(absl::StrContains(lines[0], "Cannot allocate memory")) << log;
  EXPECT_TRUE(absl::StrContains(lines[0], "ulimit -l, now 64 KiB")) << log;
  EXPECT_TRUE(absl::StrContains(lines[0], "CAP_IPC_LOCK")) << log;
}

}  // namespace

}  // namespace zt::offload
