// util/direct_io.h and the O_DIRECT paths of util/file_io.h, against the
// plain buffered path as the reference: every byte equal, whatever the
// offsets, lengths and patches.
//  * DirectPRead at offsets and lengths around the 4 KiB blocks and the
//    8 MiB pieces, up to and past the end of the file;
//  * ReadFile with direct reads: the same bytes as buffered reads, the same
//    truncation message;
//  * AtomicFile entering direct mode mid-file: random appends and patches
//    (below the stage, in it, across its start, on the block in flight),
//    moves, aborts; a write failure in direct mode names the file and
//    leaves nothing behind;
//  * a checkpoint file written and read through the direct paths equals the
//    one written and read through the page cache.
// Where the scratch filesystem refuses O_DIRECT, the same checks run on the
// buffered fallback (which is then what users get).
#include "util/direct_io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "ckpt/format/pt_file.h"
#include "tests/ckpt/ckpt_test_util.h"
#include "util/file_io.h"

namespace zt::ckpt {
namespace {

using testing::ReadAll;
using testing::ScratchDir;
using testing::WriteAll;

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// Whether the scratch directory's filesystem takes O_DIRECT.
bool DirectSupported(const std::string& dir) {
  const std::string probe = dir + "/probe";
  WriteAll(probe, "x");
  const int fd = ::open(probe.c_str(), O_RDONLY | O_DIRECT);
  if (fd >= 0) ::close(fd);
  ::unlink(probe.c_str());
  return fd >= 0;
}

TEST(DirectPRead, EqualsTheFileAtEveryBoundary) {
  ScratchDir dir;
  if (!DirectSupported(dir.path())) GTEST_SKIP() << "no O_DIRECT on " << dir.path();
  const std::string path = dir.File("data");
  const size_t size = 2 * kDirectReadPiece + 3 * kDirectAlignment + 123;  // a short last block
  const std::string bytes = RandomBytes(size, 1);
  WriteAll(path, bytes);
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
  ASSERT_GE(fd, 0);
  const std::vector<uint64_t> offsets = {
      0, 1, 4095, 4096, 4097, kDirectReadPiece - 1, kDirectReadPiece, size - 1, size - 4097, size - 123};
  const std::vector<size_t> lengths = {1, 100, 4095, 4096, 4097, kDirectReadPiece, kDirectReadPiece + 5000};
  std::string out;
  for (uint64_t off : offsets) {
    for (size_t n : lengths) {
      if (off + n > size) n = size - off;
      out.assign(n + 2, '\x5a');
      ASSERT_EQ(DirectPRead(fd, out.data() + 1, n, off), 0) << "offset " << off << " length " << n;
      ASSERT_EQ(out.substr(1, n), bytes.substr(off, n)) << "offset " << off << " length " << n;
      ASSERT_EQ(out[0], '\x5a');
      ASSERT_EQ(out[n + 1], '\x5a') << "wrote past the destination";
    }
  }
  out.resize(10);
  EXPECT_EQ(DirectPRead(fd, out.data(), 10, size - 5), -1) << "a read past the end reports the end";
  ::close(fd);
}

TEST(ReadFile, DirectReadsEqualBufferedReads) {
  ScratchDir dir;
  const std::string path = dir.File("data");
  const std::string bytes = RandomBytes(kDirectReadPiece + 70000, 2);
  WriteAll(path, bytes);
  auto direct = ReadFile::Open(path, ReadFileOptions{1});
  auto buffered = ReadFile::Open(path);
  ASSERT_TRUE(direct.ok() && buffered.ok());
  EXPECT_EQ(direct->direct(), DirectSupported(dir.path()));
  EXPECT_FALSE(buffered->direct());
  std::mt19937 rng(3);
  for (int i = 0; i < 200; ++i) {
    const uint64_t off = rng() % bytes.size();
    const size_t n = i % 7 == 0 ? bytes.size() - off : rng() % std::min<size_t>(bytes.size() - off, 3 << 20);
    std::string a(n, '\0'), b(n, '\0');
    ASSERT_TRUE(direct->PRead(a.data(), n, off).ok());
    ASSERT_TRUE(buffered->PRead(b.data(), n, off).ok());
    ASSERT_EQ(a, b) << "offset " << off << " length " << n;
    ASSERT_EQ(a, bytes.substr(off, n));
  }
  std::string tail(100, '\0');
  absl::Status st = direct->PRead(tail.data(), 100, bytes.size() - 50);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(absl::StrContains(st.message(), "'" + path + "' is truncated: expected 100 bytes")) << st;
}

// Appends of random sizes with patches anywhere in what was written: the
// file equals the same operations on a string.
void WriteRandomly(const std::string& path, const AtomicFileOptions& options, uint32_t seed, std::string* expected,
                   bool* went_direct) {
  std::mt19937 rng(seed);
  auto file = AtomicFile::Create(path, options);
  ASSERT_TRUE(file.ok()) << file.status();
  expected->clear();
  *went_direct = false;
  for (int i = 0; i < 300; ++i) {
    const size_t n = i % 50 == 0 ? 70000 : rng() % 9000;
    const std::string chunk = RandomBytes(n, rng());
    ASSERT_TRUE(file->Append(chunk.data(), chunk.size()).ok());
    *expected += chunk;
    *went_direct = *went_direct || file->direct();
    if (!expected->empty() && rng() % 3 == 0) {
      // A patch: anywhere, or just behind the end (the stage), or across a block start.
      uint64_t at = rng() % expected->size();
      if (rng() % 2 == 0) at = expected->size() - std::min<size_t>(expected->size(), 1 + rng() % 10);
      if (rng() % 4 == 0) at = AlignDown(at) >= 2 ? AlignDown(at) - 2 : at;
      const size_t len = std::min<size_t>(expected->size() - at, 1 + rng() % 6);
      const std::string patch = RandomBytes(len, rng());
      ASSERT_TRUE(file->PWrite(patch.data(), len, at).ok());
      expected->replace(at, len, patch);
    }
    ASSERT_EQ(file->size(), expected->size());
  }
  if (seed % 2 == 0) {
    AtomicFile moved = std::move(*file);  // the block in flight moves along
    ASSERT_TRUE(moved.Commit().ok());
  } else {
    ASSERT_TRUE(file->Commit().ok());
  }
}

TEST(AtomicFile, DirectModeWritesTheSameBytes) {
  ScratchDir dir;
  const bool supported = DirectSupported(dir.path());
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    AtomicFileOptions options;
    options.direct_after = seed * 3000;
    options.direct_block = seed % 3 == 0 ? 4096 : 3 * 4096;
    std::string expected;
    bool went_direct = false;
    const std::string path = dir.File("out" + std::to_string(seed));
    WriteRandomly(path, options, seed, &expected, &went_direct);
    ASSERT_EQ(ReadAll(path), expected) << "seed " << seed;
    EXPECT_EQ(went_direct, supported) << "seed " << seed;
  }
  std::string expected;
  bool went_direct = true;
  WriteRandomly(dir.File("buffered"), AtomicFileOptions{}, 9, &expected, &went_direct);
  EXPECT_EQ(ReadAll(dir.File("buffered")), expected);
  EXPECT_FALSE(went_direct) << "direct_after 0 never goes direct";
}

TEST(AtomicFile, AbortInDirectModeLeavesNothing) {
  ScratchDir dir;
  const std::string path = dir.File("ckpt.pt");
  WriteAll(path, "old contents");
  {
    auto file = AtomicFile::Create(path, AtomicFileOptions{1, 4096});
    ASSERT_TRUE(file.ok());
    const std::string bytes = RandomBytes(50000, 4);
    ASSERT_TRUE(file->Append(bytes.data(), bytes.size()).ok());
    ASSERT_TRUE(file->Append(bytes.data(), bytes.size()).ok());
  }  // destroyed uncommitted, a block possibly in flight
  EXPECT_EQ(ReadAll(path), "old contents");
  EXPECT_EQ(dir.List(), std::vector<std::string>{"ckpt.pt"});
}

// The direct writes hit a size limit the way they would hit a full disk:
// the error names the file and the limit, nothing is left behind.
TEST(AtomicFile, DirectWriteFailureNamesTheFile) {
  ScratchDir dir;
  if (!DirectSupported(dir.path())) GTEST_SKIP() << "no O_DIRECT on " << dir.path();
  const std::string path = dir.File("big.pt");
  WriteAll(path, "previous checkpoint");
  // The file is gone (destroyed uncommitted) before the child exits.
  const int code = testing::ExitCodeUnderFileSizeLimit(1 << 20, [&] {
    auto file = AtomicFile::Create(path, AtomicFileOptions{4096, 64 << 10});
    if (!file.ok()) return 13;
    const std::string bytes = RandomBytes(100000, 5);
    absl::Status st;
    for (int i = 0; i < 40 && st.ok(); ++i) st = file->Append(bytes.data(), bytes.size());
    if (st.ok()) st = file->Commit();
    if (st.ok()) return 11;
    const std::string msg(st.message());
    if (!absl::StrContains(msg, "O_DIRECT")) return 14;
    if (!absl::StrContains(msg, "File too large") || !absl::StrContains(msg, path)) {
      std::fprintf(stderr, "unexpected message: %s\n", msg.c_str());
      return 12;
    }
    return 0;
  });
  EXPECT_EQ(code, 0) << "-1: the child did not run or exit, 10: setrlimit, 11: the writes succeeded, "
                        "12: wrong message, 13: create, 14: the failure was not in direct mode";
  EXPECT_EQ(ReadAll(path), "previous checkpoint");
  EXPECT_EQ(dir.List(), std::vector<std::string>{"big.pt"});
}

// A .pt file larger than the streaming threshold, written through the
// page cache, with O_DIRECT, and streamed from sources with read-ahead and
// O_DIRECT (the converters' path): the three files are byte for byte the
// same, and the direct reader reads each tensor back, CRC-checked. The
// tensors mix large and small records, pulled from sources and held in
// memory, so the read-ahead runs across record boundaries and stops where
// an in-memory record comes between.
TEST(PtFile, LargeFileThroughTheDirectPaths) {
  ScratchDir dir;
  struct Named {
    const char* name;
    size_t n;
    bool always_in_memory;
  };
  const size_t big = (kStreamingDirectAfter + (5 << 20) + 12) / 4;
  const std::vector<Named> layout = {{"weights", big, false},
                                     {"bias", 37, false},
                                     {"scale", 5, true},
                                     {"head", big / 3 + 5, false},
                                     {"tail", 3, false}};
  std::vector<std::vector<float>> data;
  std::mt19937 rng(6);
  for (const Named& t : layout) {
    data.emplace_back(t.n);
    for (float& f : data.back()) f = static_cast<float>(rng()) / 1e6f;
  }
  auto tree = [&](bool streamed) {
    Dict root;
    for (size_t i = 0; i < layout.size(); ++i) {
      TensorRef t;
      t.shape = {static_cast<int64_t>(layout[i].n)};
      if (streamed && !layout[i].always_in_memory) {
        t.source = [&d = data[i]](uint64_t offset, void* dst, uint64_t len) {
          std::memcpy(dst, reinterpret_cast<const char*>(d.data()) + offset, len);
          return absl::OkStatus();
        };
      } else {
        t.data = data[i].data();
      }
      root.Set(layout[i].name, Value(t));
    }
    root.Set("step", int64_t{7});
    return Value(std::move(root));
  };
  PtWriteOptions direct;
  direct.direct_io = true;
  PtWriteOptions streamed = direct;
  streamed.read_ahead = true;
  ASSERT_TRUE(WritePtFile(dir.File("buffered.pt"), tree(false)).ok());
  ASSERT_TRUE(WritePtFile(dir.File("direct.pt"), tree(false), direct).ok());
  ASSERT_TRUE(WritePtFile(dir.File("streamed.pt"), tree(true), streamed).ok());
  const std::string reference = ReadAll(dir.File("buffered.pt"));
  for (const char* name : {"direct.pt", "streamed.pt"}) {
    EXPECT_TRUE(ReadAll(dir.File(name)) == reference) << name << " differs from the buffered write";
    auto reader = PtReader::Open(dir.File(name), ReadFileOptions{kStreamingDirectMin});
    ASSERT_TRUE(reader.ok()) << reader.status();
    EXPECT_EQ(reader.value()->root().AsDict().Find("step")->AsInt(), 7);
    for (size_t i = 0; i < layout.size(); ++i) {
      const TensorRef& w = reader.value()->root().AsDict().Find(layout[i].name)->AsTensor();
      std::vector<float> back(layout[i].n);
      ASSERT_TRUE(reader.value()->Read(w, back.data(), /*verify=*/true).ok());
      EXPECT_EQ(std::memcmp(back.data(), data[i].data(), layout[i].n * 4), 0) << name << " " << layout[i].name;
    }
    ASSERT_TRUE(reader.value()->VerifyAll().ok()) << name;
  }
}

// A source that fails part-way through a run of streamed records: the
// write fails with the source's error, and nothing is left behind.
TEST(PtFile, StreamedSourceFailureLeavesNothing) {
  ScratchDir dir;
  std::vector<float> data(3 << 20, 1.5f);
  Dict root;
  for (int i = 0; i < 3; ++i) {
    TensorRef t;
    t.shape = {static_cast<int64_t>(data.size())};
    t.source = [&data, i](uint64_t offset, void* dst, uint64_t len) {
      if (i == 2 && offset > 0) return absl::DataLossError("source 2 broke");
      std::memcpy(dst, reinterpret_cast<const char*>(data.data()) + offset, len);
      return absl::OkStatus();
    };
    root.Set("t" + std::to_string(i), Value(t));
  }
  PtWriteOptions streamed;
  streamed.direct_io = true;
  streamed.read_ahead = true;
  absl::Status st = WritePtFile(dir.File("out.pt"), Value(std::move(root)), streamed);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "source 2 broke");
  EXPECT_TRUE(dir.List().empty());
}

}  // namespace
}  // namespace zt::ckpt
