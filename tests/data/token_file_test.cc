// Token files: llm.c headers (uint16, uint32) written and detected, nanoGPT
// raw arrays, and every malformed file rejected with its name in the error.
#include "data/token_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/data/data_test_util.h"

namespace zt::data {
namespace {

using testing::ReadBytes;
using testing::ScratchDir;
using testing::WriteBytes;

std::vector<int32_t> ReadAll(const TokenFile& f) {
  std::vector<int32_t> out(static_cast<size_t>(f.size()));
  f.Copy(0, f.size(), out.data());
  return out;
}

std::string Int32s(const std::vector<int32_t>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

std::string Header(int32_t magic, int32_t version, int32_t count) {
  std::vector<int32_t> h(256, 0);
  h[0] = magic;
  h[1] = version;
  h[2] = count;
  return Int32s(h);
}

struct RoundTripCase {
  const char* name;
  std::vector<int32_t> tokens;
  TokenDType write_dtype;
  bool header;
  TokenDType read_dtype;
  TokenDType expect_dtype;
  int64_t expect_bytes;
};

TEST(TokenFileTest, RoundTrips) {
  const std::vector<int32_t> small = {0, 1, 50256, 65535, 7};
  const std::vector<int32_t> big = {0, 65536, 128255, 3};
  const RoundTripCase cases[] = {
      {"llmc_u16", small, TokenDType::kUInt16, true, TokenDType::kAuto, TokenDType::kUInt16, 1024 + 5 * 2},
      {"llmc_u32", big, TokenDType::kUInt32, true, TokenDType::kAuto, TokenDType::kUInt32, 1024 + 4 * 4},
      {"llmc_auto_u16", small, TokenDType::kAuto, true, TokenDType::kAuto, TokenDType::kUInt16, 1024 + 5 * 2},
      {"llmc_auto_u32", big, TokenDType::kAuto, true, TokenDType::kAuto, TokenDType::kUInt32, 1024 + 4 * 4},
      {"llmc_explicit_match", big, TokenDType::kUInt32, true, TokenDType::kUInt32, TokenDType::kUInt32, 1024 + 16},
      {"nanogpt_raw_u16", small, TokenDType::kUInt16, false, TokenDType::kAuto, TokenDType::kUInt16, 5 * 2},
      {"raw_u32", big, TokenDType::kUInt32, false, TokenDType::kUInt32, TokenDType::kUInt32, 4 * 4},
  };
  ScratchDir dir;
  for (const RoundTripCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.File(c.name);
    ASSERT_TRUE(WriteTokenFile(path, c.tokens, c.write_dtype, c.header).ok());
    EXPECT_EQ(static_cast<int64_t>(ReadBytes(path).size()), c.expect_bytes);
    auto f = OpenTokenFile(path, c.read_dtype);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(f->has_llmc_header(), c.header);
    EXPECT_EQ(f->dtype(), c.expect_dtype);
    EXPECT_EQ(f->size(), static_cast<int64_t>(c.tokens.size()));
    EXPECT_EQ(ReadAll(*f), c.tokens);
    for (size_t i = 0; i < c.tokens.size(); ++i) EXPECT_EQ(f->at(static_cast<int64_t>(i)), c.tokens[i]);
    int32_t mid[2];
    f->Copy(1, 2, mid);
    EXPECT_EQ(mid[0], c.tokens[1]);
    EXPECT_EQ(mid[1], c.tokens[2]);
  }
}

TEST(TokenFileTest, LlmcHeaderLayout) {
  ScratchDir dir;
  const std::string path = dir.File("h.bin");
  ASSERT_TRUE(WriteTokenFile(path, std::vector<int32_t>{5, 6, 7}, TokenDType::kUInt32, true).ok());
  const std::string bytes = ReadBytes(path);
  ASSERT_EQ(bytes.size(), 1024u + 12u);
  int32_t h[3];
  std::memcpy(h, bytes.data(), sizeof(h));
  EXPECT_EQ(h[0], 20240520);
  EXPECT_EQ(h[1], 2);
  EXPECT_EQ(h[2], 3);
}

TEST(TokenFileTest, ReadsAHandWrittenNanoGptFile) {
  ScratchDir dir;
  const std::vector<uint16_t> raw = {10, 20, 30, 65000};
  WriteBytes(dir.File("train.bin"), std::string(reinterpret_cast<const char*>(raw.data()), raw.size() * 2));
  auto f = OpenTokenFile(dir.File("train.bin"));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FALSE(f->has_llmc_header());
  EXPECT_EQ(ReadAll(*f), (std::vector<int32_t>{10, 20, 30, 65000}));
  EXPECT_EQ(f->MaxToken(), 65000);
}

TEST(TokenFileTest, MoveKeepsTheMapping) {
  ScratchDir dir;
  ASSERT_TRUE(WriteTokenFile(dir.File("m.bin"), std::vector<int32_t>{1, 2, 3}).ok());
  auto f = OpenTokenFile(dir.File("m.bin"));
  ASSERT_TRUE(f.ok());
  TokenFile moved = std::move(*f);
  EXPECT_EQ(moved.size(), 3);
  EXPECT_EQ(moved.at(2), 3);
  auto g = OpenTokenFile(dir.File("m.bin"));
  ASSERT_TRUE(g.ok());
  moved = std::move(*g);  // unmaps the first mapping
  EXPECT_EQ(moved.at(0), 1);
}

TEST(TokenFileTest, CheckVocabReportsFirstOffender) {
  ScratchDir dir;
  ASSERT_TRUE(WriteTokenFile(dir.File("v.bin"), std::vector<int32_t>{1, 300, 2, 999}).ok());
  auto f = OpenTokenFile(dir.File("v.bin"));
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->CheckVocab(1000).ok());
  absl::Status s = f->CheckVocab(256);
  ASSERT_FALSE(s.ok());
  const std::string msg(s.message());
  EXPECT_NE(msg.find(dir.File("v.bin")), std::string::npos) << msg;
  EXPECT_NE(msg.find("token 1 is 300"), std::string::npos) << msg;
  EXPECT_NE(msg.find("999"), std::string::npos) << msg;  // the maximum
}

struct BadCase {
  const char* name;
  std::string bytes;
  TokenDType dtype;
  const char* expect;  // a fragment of the message
};

TEST(TokenFileTest, MalformedFilesAreErrorsNamingTheFile) {
  const BadCase cases[] = {
      {"empty", "", TokenDType::kAuto, "empty"},
      {"odd_u16", std::string(7, 'a'), TokenDType::kAuto, "not a whole number of uint16"},
      {"odd_u32", std::string(6, 'a'), TokenDType::kUInt32, "not a whole number of uint32"},
      {"short_header", Header(20240520, 1, 2).substr(0, 100), TokenDType::kAuto, "shorter than its 1024-byte header"},
      {"bad_version", Header(20240520, 7, 2) + std::string(4, 'x'), TokenDType::kAuto, "header version 7"},
      {"truncated", Header(20240520, 1, 10) + std::string(8, 'x'), TokenDType::kAuto, "truncated"},
      {"trailing", Header(20240520, 2, 1) + std::string(8, 'x'), TokenDType::kAuto, "trailing bytes"},
      {"dtype_mismatch", Header(20240520, 1, 2) + std::string(4, 'x'), TokenDType::kUInt32,
       "uint16 tokens, but uint32"},
      {"zero_count", Header(20240520, 1, 0), TokenDType::kAuto, "0 tokens"},
  };
  ScratchDir dir;
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.File(c.name);
    WriteBytes(path, c.bytes);
    auto f = OpenTokenFile(path, c.dtype);
    ASSERT_FALSE(f.ok());
    const std::string msg(f.status().message());
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.expect), std::string::npos) << msg;
  }
  auto missing = OpenTokenFile(dir.File("missing.bin"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(dir.File("missing.bin")), std::string::npos);
}

TEST(TokenFileTest, WriteRejectsTokensThatDoNotFit) {
  ScratchDir dir;
  absl::Status s = WriteTokenFile(dir.File("w.bin"), std::vector<int32_t>{1, 70000}, TokenDType::kUInt16, false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("token 1 is 70000"), std::string::npos) << s;
  s = WriteTokenFile(dir.File("w.bin"), std::vector<int32_t>{-3}, TokenDType::kUInt32, false);
  ASSERT_FALSE(s.ok());
  EXPECT_FALSE(std::filesystem::exists(dir.File("w.bin")));
  // Nothing but the target is left behind by a successful write (no temporaries).
  ASSERT_TRUE(WriteTokenFile(dir.File("ok.bin"), std::vector<int32_t>{1}).ok());
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1);
}

TEST(TokenFileTest, ParseTokenDType) {
  EXPECT_EQ(*ParseTokenDType("auto"), TokenDType::kAuto);
  EXPECT_EQ(*ParseTokenDType("uint16"), TokenDType::kUInt16);
  EXPECT_EQ(*ParseTokenDType("u32"), TokenDType::kUInt32);
  EXPECT_FALSE(ParseTokenDType("int8").ok());
}

}  // namespace
}  // namespace zt::data
