// Byte tokenizer round trips and text corpus loading (files, directories,
// binary and duplicate files skipped, errors naming the path).
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "data/text_corpus.h"
#include "tests/data/data_test_util.h"
#include "tokenizer/byte_tokenizer.h"

namespace zt::data {
namespace {

using testing::ScratchDir;
using testing::WriteBytes;

TEST(ByteTokenizerTest, EncodeGivesByteValues) {
  EXPECT_EQ(EncodeBytes("Hi"), (std::vector<int32_t>{72, 105}));
  EXPECT_EQ(EncodeBytes(std::string("\xff\x00\x80", 3)), (std::vector<int32_t>{255, 0, 128}));
  EXPECT_TRUE(EncodeBytes("").empty());
}

TEST(ByteTokenizerTest, RoundTripsEveryByte) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::vector<int32_t> ids = EncodeBytes(all);
  ASSERT_EQ(ids.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[b], b);
  EXPECT_EQ(DecodeBytes(ids), all);
  std::vector<int64_t> wide(ids.begin(), ids.end());
  EXPECT_EQ(DecodeBytes(wide), all);
}

TEST(ByteTokenizerTest, OutOfRangeIdsDecodeToReplacement) {
  const std::vector<int32_t> ids = {65, 256, -1, 66, 100000};
  EXPECT_EQ(DecodeBytes(ids), "A??B?");
}

TEST(TextCorpusTest, SingleFile) {
  ScratchDir dir;
  WriteBytes(dir.File("a.txt"), "hello");
  auto ids = LoadTextCorpus(dir.File("a.txt"));
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(DecodeBytes(*ids), "hello");
}

TEST(TextCorpusTest, DirectorySortedSkipsBinaryAndDuplicatesAndSubdirs) {
  ScratchDir dir;
  WriteBytes(dir.File("b"), "second");
  WriteBytes(dir.File("a"), "first");
  WriteBytes(dir.File("a.dat"), std::string("\x00\x01\x02", 3));  // binary: skipped
  ASSERT_EQ(::symlink("a", dir.File("a.u8").c_str()), 0);         // same file: skipped
  std::filesystem::create_directory(dir.File("sub"));
  WriteBytes(dir.File("sub/c"), "not recursive");
  auto files = ListTextCorpusFiles(dir.path());
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(*files, (std::vector<std::string>{dir.File("a"), dir.File("b")}));
  auto ids = LoadTextCorpus(dir.path());
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(DecodeBytes(*ids), "first\nsecond");
}

TEST(TextCorpusTest, TokenCountFromSizesEqualsTheLoadedCorpus) {
  // The launcher counts tokens from file sizes; the ranks load them. Both
  // must agree (separators between files, skipped binaries and duplicates,
  // an empty file among others), and fail alike on an empty corpus.
  ScratchDir dir;
  WriteBytes(dir.File("b"), "second file\n");
  WriteBytes(dir.File("a"), "first");
  WriteBytes(dir.File("c"), "");
  WriteBytes(dir.File("a.dat"), std::string("\x00\x01\x02", 3));
  ASSERT_EQ(::symlink("a", dir.File("a.u8").c_str()), 0);
  for (const std::string& path : {dir.path(), dir.File("a"), std::string(kDefaultTextCorpus)}) {
    if (!std::filesystem::exists(path)) continue;
    auto ids = LoadTextCorpus(path);
    auto n = CountTextCorpusTokens(path);
    ASSERT_TRUE(ids.ok() && n.ok()) << path;
    EXPECT_EQ(*n, static_cast<int64_t>(ids->size())) << path;
  }
  ScratchDir empty;
  WriteBytes(empty.File("e"), "");
  EXPECT_EQ(CountTextCorpusTokens(empty.path()).status().message(), LoadTextCorpus(empty.path()).status().message());
}

TEST(TextCorpusTest, BinaryProbeLooksOnlyAtFirst4KiB) {
  ScratchDir dir;
  WriteBytes(dir.File("late_nul"), std::string(5000, 'x') + std::string(1, '\0'));
  WriteBytes(dir.File("early_nul"), std::string(4095, 'x') + std::string(1, '\0'));
  auto files = ListTextCorpusFiles(dir.path());
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(*files, (std::vector<std::string>{dir.File("late_nul")}));
}

TEST(TextCorpusTest, ErrorsNameThePath) {
  ScratchDir dir;
  const std::string missing = dir.File("nope");
  auto r = LoadTextCorpus(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(missing), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("--data"), std::string::npos) << r.status();

  WriteBytes(dir.File("empty"), "");
  r = LoadTextCorpus(dir.File("empty"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("empty"), std::string::npos) << r.status();

  ScratchDir only_binary;
  WriteBytes(only_binary.File("x.dat"), std::string(8, '\0'));
  r = LoadTextCorpus(only_binary.path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(only_binary.path()), std::string::npos) << r.status();
}

TEST(TextCorpusTest, UnreadableFileIsAnError) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files without read permission";
  ScratchDir dir;
  WriteBytes(dir.File("secret"), "text");
  ASSERT_EQ(::chmod(dir.File("secret").c_str(), 0), 0);
  auto r = LoadTextCorpus(dir.File("secret"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(dir.File("secret")), std::string::npos) << r.status();
}

TEST(TextCorpusTest, DefaultCorpusHintNamesTheDebianPackage) {
  if (std::filesystem::exists(kDefaultTextCorpus)) {
    auto ids = LoadTextCorpus(kDefaultTextCorpus);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_GT(ids->size(), 100000u);
    for (int32_t id : *ids) ASSERT_TRUE(id >= 0 && id < kByteVocabSize);
    auto files = ListTextCorpusFiles(kDefaultTextCorpus);
    ASSERT_TRUE(files.ok()) << files.status();
    for (const std::string& f : *files) {
      EXPECT_FALSE(absl::EndsWith(f, ".dat")) << f;  // binary index files
      EXPECT_FALSE(absl::EndsWith(f, ".u8")) << f;   // symlinks to files already listed
    }
  } else {
    auto r = LoadTextCorpus(kDefaultTextCorpus);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("fortunes"), std::string::npos) << r.status();
  }
}

}  // namespace
}  // namespace zt::data
