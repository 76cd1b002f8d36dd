// ckpt/format/crc32.h and util/file_io.h: CRC-32 against a bitwise reference (every alignment and
// tail length, incremental use), AtomicFile's all-or-nothing contract
// (nothing visible before Commit, the old file intact after an abort, no
// temporaries left, a full-disk-like failure in a child process), ReadFile's
// exact-size reads and their messages.
#include "util/file_io.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <random>

#include "absl/strings/match.h"
#include "ckpt/format/crc32.h"
#include "ckpt/format/pt_file.h"
#include "tests/ckpt/ckpt_test_util.h"

namespace zt::ckpt {
namespace {

using testing::ReadAll;
using testing::ScratchDir;
using testing::WriteAll;

uint32_t ReferenceCrc32(const unsigned char* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
  }
  return ~c;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

TEST(Crc32, KnownVectors) {
  EXPECT_EQ(Crc32(0, "", 0), 0u);
  EXPECT_EQ(Crc32(0, "123456789", 9), 0xCBF43926u);
  EXPECT_EQ(Crc32(0, "The quick brown fox jumps over the lazy dog", 43), 0x414FA339u);
}

TEST(Crc32, MatchesBitwiseReferenceAtEveryAlignmentAndTail) {
  std::mt19937 rng(7);
  std::vector<unsigned char> buf(300);
  for (auto& b : buf) b = static_cast<unsigned char>(rng());
  for (size_t start = 0; start < 8; ++start) {
    for (size_t n = 0; n + start <= buf.size(); n += (n < 40 ? 1 : 13)) {
      ASSERT_EQ(Crc32(0, buf.data() + start, n), ReferenceCrc32(buf.data() + start, n))
          << "start " << start << " n " << n;
    }
  }
}

TEST(Crc32, IncrementalEqualsOneShot) {
  std::vector<unsigned char> buf(10000);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<unsigned char>(i * 31 + 7);
  const uint32_t whole = Crc32(0, buf.data(), buf.size());
  for (size_t split : {0, 1, 7, 8, 9, 4096, 9999, 10000}) {
    uint32_t c = Crc32(0, buf.data(), split);
    c = Crc32(c, buf.data() + split, buf.size() - split);
    EXPECT_EQ(c, whole) << "split at " << split;
  }
}

TEST(AtomicFile, NothingVisibleBeforeCommit) {
  ScratchDir dir;
  const std::string path = dir.File("out.bin");
  {
    auto file = AtomicFile::Create(path);
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_TRUE(file->Append("hello world", 11).ok());
    ASSERT_TRUE(file->PWrite("HELLO", 5, 0).ok());  // patch bytes already written
    EXPECT_EQ(file->size(), 11u);
    EXPECT_FALSE(Exists(path));
    ASSERT_EQ(dir.List().size(), 1u);  // just the temporary
    EXPECT_TRUE(absl::StartsWith(dir.List()[0], "out.bin.tmp."));
    ASSERT_TRUE(file->Commit().ok());
    EXPECT_FALSE(file->Commit().ok()) << "a second Commit must fail";
    EXPECT_FALSE(file->Append("x", 1).ok()) << "writing after Commit must fail";
  }
  EXPECT_EQ(ReadAll(path), "HELLO world");
  EXPECT_EQ(dir.List(), std::vector<std::string>{"out.bin"});
}

TEST(AtomicFile, AbortLeavesOldFileIntactAndNoTemporary) {
  ScratchDir dir;
  const std::string path = dir.File("ckpt.pt");
  WriteAll(path, "old contents");
  {
    auto file = AtomicFile::Create(path);
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE(file->Append("new", 3).ok());
    // Moving keeps exactly one owner of the temporary.
    AtomicFile moved = std::move(*file);
    AtomicFile assigned = std::move(moved);
  }  // destroyed uncommitted
  EXPECT_EQ(ReadAll(path), "old contents");
  EXPECT_EQ(dir.List(), std::vector<std::string>{"ckpt.pt"});
}

TEST(AtomicFile, CreateInMissingDirectoryNamesThePath) {
  ScratchDir dir;
  auto file = AtomicFile::Create(dir.File("missing/sub/file"));
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound) << file.status();
  EXPECT_TRUE(absl::StrContains(file.status().message(), "missing/sub/file")) << file.status();
  EXPECT_TRUE(absl::StrContains(file.status().message(), "No such file")) << file.status();
}

// A size limit makes writes fail mid-file the way a full disk does; the
// write must report it (errno text, path) and leave nothing behind. In a
// child process: the limit and the ignored SIGXFSZ must not leak.
TEST(AtomicFile, WriteFailureMidFileLeavesNothing) {
  ScratchDir dir;
  const std::string path = dir.File("big.pt");
  WriteAll(path, "previous checkpoint");
  const int code = testing::ExitCodeUnderFileSizeLimit(1 << 16, [&] {
    std::vector<float> data(1 << 20, 1.0f);
    TensorRef t;
    t.shape = {1 << 20};
    t.data = data.data();
    absl::Status st = WritePtFile(path, Value(t));
    if (st.ok()) return 11;
    const std::string msg(st.message());
    if (!absl::StrContains(msg, "File too large") || !absl::StrContains(msg, path)) {
      std::fprintf(stderr, "unexpected message: %s\n", msg.c_str());
      return 12;
    }
    return 0;
  });
  EXPECT_EQ(code, 0) << "-1: the child did not run or exit, 10: setrlimit failed, 11: the write succeeded, "
                        "12: wrong message";
  EXPECT_EQ(ReadAll(path), "previous checkpoint");
  EXPECT_EQ(dir.List(), std::vector<std::string>{"big.pt"});
}

TEST(SmallFiles, WriteAtomicallyThenRead) {
  ScratchDir dir;
  const std::string path = dir.File("latest");
  ASSERT_TRUE(WriteFileAtomically(path, "global_step10").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "global_step20").ok());  // replaces
  auto text = ReadSmallFile(path);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "global_step20");
  auto too_big = ReadSmallFile(path, 4);
  ASSERT_FALSE(too_big.ok());
  EXPECT_TRUE(absl::StrContains(too_big.status().message(), "13 bytes")) << too_big.status();
  auto missing = ReadSmallFile(dir.File("nope"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), dir.File("nope"))) << missing.status();
  auto directory = ReadSmallFile(dir.path());
  ASSERT_FALSE(directory.ok());
  EXPECT_TRUE(absl::StrContains(directory.status().message(), "is a directory")) << directory.status();
}

TEST(ReadFile, ExactReadsAndTruncationMessage) {
  ScratchDir dir;
  const std::string path = dir.File("data");
  WriteAll(path, "0123456789");
  auto file = ReadFile::Open(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->size(), 10u);
  char buf[8] = {};
  ASSERT_TRUE(file->PRead(buf, 4, 6).ok());
  EXPECT_EQ(std::string(buf, 4), "6789");
  ASSERT_TRUE(file->PRead(buf, 0, 10).ok());
  absl::Status st = file->PRead(buf, 5, 8);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(absl::StrContains(st.message(), "'" + path + "' is truncated: expected 5 bytes at offset 8, file has 10"))
      << st;
}

}  // namespace
}  // namespace zt::ckpt
