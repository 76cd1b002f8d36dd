// IoEngine under every option combination that changes how pieces move:
// both backends x threads 1-4 x queue_depth 1/4/32 x block_size 4 KiB - 8 MiB
// x single_submit x overlap_events. Each case writes random data to random
// non-overlapping regions (all in flight at once, out of file order), reads
// them back the same way, then reads the whole file in one request and
// compares every byte, gaps included (they must still be zeros).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "offload/aligned_buffer.h"
#include "offload/io_engine.h"
#include "offload/swap_file.h"
#include "tests/offload/offload_test_util.h"
#include "tests/testing/scratch_dir.h"

namespace zt::offload {
namespace {

using testing::FirstMismatch;
using testing::OptionsName;
using testing::RandomRegions;
using testing::Region;

using Combo = std::tuple<IoBackend, int, int, int64_t, bool, bool>;

IoOptions OptionsOf(const Combo& c) {
  IoOptions o;
  o.backend = std::get<0>(c);
  o.threads = std::get<1>(c);
  o.queue_depth = std::get<2>(c);
  o.block_size = std::get<3>(c);
  o.single_submit = std::get<4>(c);
  o.overlap_events = std::get<5>(c);
  return o;
}

class IoMatrixTest : public ::testing::TestWithParam<Combo> {};

TEST_P(IoMatrixTest, RandomRoundTripEveryByte) {
  const IoOptions options = OptionsOf(GetParam());
  ZT_ENGINE_OR_SKIP(io, options);
  ASSERT_EQ(io->backend(), options.backend);
  SCOPED_TRACE(OptionsName(options));

  const uint64_t block = static_cast<uint64_t>(options.block_size);
  std::mt19937_64 rng(std::hash<std::string>()(OptionsName(options)));
  // Regions up to a little over two blocks, so requests split into several
  // pieces with a short tail; 4 KiB blocks get regions of up to 64 pieces.
  // With 8 MiB blocks, random regions of up to 1 MiB plus one of a block and
  // two pages (two pieces) keep the suite's disk traffic in bounds.
  const bool big = block >= (8 << 20);
  const uint64_t max_bytes = big ? (1 << 20) : std::max<uint64_t>(2 * block + 3 * kIoAlignment, 256 << 10);
  uint64_t end = 0;
  std::vector<Region> regions = RandomRegions(rng, max_bytes, big ? (2 << 20) : (3 << 20), 48, &end);
  if (big) regions.push_back({end, block + 2 * kIoAlignment});
  for (const Region& r : regions) end = std::max(end, r.offset + r.bytes);
  const uint64_t file_size = end + (rng() % 8) * kIoAlignment;

  zt::testing::ScratchDir dir("zt_io");
  auto file = SwapFile::Create(dir.path(), "matrix.swp", file_size);
  ASSERT_TRUE(file.ok()) << file.status();
  auto image = AlignedBuffer::Allocate(file_size);  // what the file must hold
  auto back = AlignedBuffer::Allocate(file_size);
  ASSERT_TRUE(image.ok() && back.ok());
  std::memset(image->data(), 0, file_size);
  std::memset(back->data(), 0xee, file_size);
  char* want = static_cast<char*>(image->data());
  char* got = static_cast<char*>(back->data());

  uint64_t total = 0;
  std::vector<IoTicket> writes;
  for (const Region& r : regions) {
    testing::FillRandom(want + r.offset, r.bytes, rng());
    writes.push_back(io->Write(*file, r.offset, want + r.offset, r.bytes));
    total += r.bytes;
  }
  std::shuffle(writes.begin(), writes.end(), rng);
  for (IoTicket t : writes) {
    absl::Status s = io->Wait(t);
    ASSERT_TRUE(s.ok()) << s;
  }
  EXPECT_EQ(io->bytes_written(), total);

  for (const Region& r : regions) io->Read(*file, r.offset, got + r.offset, r.bytes);
  absl::Status all = io->WaitAll();
  ASSERT_TRUE(all.ok()) << all;
  for (const Region& r : regions) {
    ASSERT_EQ(FirstMismatch(got + r.offset, want + r.offset, r.bytes, r.offset), "")
        << "region at " << r.offset << " of " << r.bytes << " bytes";
  }

  std::memset(got, 0xee, file_size);
  absl::Status whole = io->ReadSync(*file, 0, got, file_size);
  ASSERT_TRUE(whole.ok()) << whole;
  EXPECT_EQ(FirstMismatch(got, want, file_size), "") << "the whole file, gaps included";
  EXPECT_EQ(io->bytes_read(), total + file_size);
}

std::string ComboName(const ::testing::TestParamInfo<Combo>& info) {
  const IoOptions o = OptionsOf(info.param);
  const int64_t b = o.block_size;
  std::string block = b >= (1 << 20) ? absl::StrCat(b >> 20, "M") : absl::StrCat(b >> 10, "K");
  return absl::StrCat(o.backend == IoBackend::kUring ? "uring" : "threads", "_t", o.threads, "_qd", o.queue_depth, "_b",
                      block, o.single_submit ? "_single" : "_batch", o.overlap_events ? "_overlap" : "_waitall");
}

INSTANTIATE_TEST_SUITE_P(AllOptions, IoMatrixTest,
                         ::testing::Combine(::testing::Values(IoBackend::kUring, IoBackend::kThreads),
                                            ::testing::Values(1, 2, 3, 4),                       // aio threads
                                            ::testing::Values(1, 4, 32),                         // queue_depth
                                            ::testing::Values(int64_t{4096}, int64_t{64} << 10,  // block_size
                                                              int64_t{1} << 20, int64_t{8} << 20),
                                            ::testing::Bool(),   // single_submit
                                            ::testing::Bool()),  // overlap_events
                         ComboName);

}  // namespace
}  // namespace zt::offload
