// llama2.c's tokenizer (tokenizer/llama2c_tokenizer.h) against its own reference
// implementation's output: the ids run.c's encode gives the fixture's three
// text prompts with tok512.bin, and the text run.c prints for the prompt and
// its 40 greedy tokens (tests/fixtures/llama2c-stories260K/ref, README.md).
#include "tokenizer/llama2c_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tokenizer/hf_tokenizer.h"

namespace zt::data {
namespace {

using ::testing::HasSubstr;

const std::string kDir = std::string(ZT_SOURCE_DIR) + "/tests/fixtures/llama2c-stories260K";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(Llama2cTokenizer, EncodesThePromptsAsRunCDoes) {
  auto tok = Llama2cTokenizer::Open(kDir + "/tok512.bin");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ(tok->vocab_size(), 512);
  for (const char* name : {"once_upon_a_time", "lily_and_ben", "sun_was_shining"}) {
    SCOPED_TRACE(name);
    const nlohmann::json ref = nlohmann::json::parse(ReadAll(kDir + "/ref/" + name + ".json"));
    const std::vector<int32_t> want = ref.at("prompt_ids").get<std::vector<int32_t>>();
    const std::vector<int32_t> got = tok->Encode(ref.at("prompt_text").get<std::string>(), true, false);
    EXPECT_EQ(got, want);
    // And back: run.c prints each token after the one before it (BOS only as "before").
    std::vector<int32_t> all = want;
    for (int32_t id : ref.at("greedy_ids").get<std::vector<int32_t>>()) all.push_back(id);
    std::string text;
    for (size_t i = 1; i < all.size(); ++i) text += tok->Decode(all[i - 1], all[i]);
    EXPECT_EQ(text, ref.at("full_text").get<std::string>());
    std::string greedy;
    for (size_t i = want.size(); i < all.size(); ++i) greedy += tok->Decode(all[i - 1], all[i]);
    EXPECT_EQ(greedy, ReadAll(kDir + "/ref/" + name + ".greedy_text.txt"));
  }
}

// The same file through the loader every command uses (zt train --tokenizer,
// zt tokenize, zt generate): HfTokenizer::Load takes a file that is not JSON
// as llama2.c's, adds BOS as its special token, and decodes without the
// special pieces as run.c prints.
TEST(Llama2cTokenizer, LoadsThroughTheCommandsTokenizerLoader) {
  auto tok = HfTokenizer::Load(kDir + "/tok512.bin");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), 512);
  EXPECT_THAT((*tok)->Describe(), HasSubstr("llama2.c tokenizer.bin"));
  EXPECT_EQ((*tok)->TokenId("<s>"), 1);
  EXPECT_EQ((*tok)->TokenId("</s>"), 2);
  EXPECT_EQ((*tok)->TokenId("<unk>"), 0);
  EXPECT_EQ((*tok)->TokenId(" time"), Llama2cTokenizer::Open(kDir + "/tok512.bin")->Id(" time"));
  for (const char* name : {"once_upon_a_time", "lily_and_ben", "sun_was_shining"}) {
    SCOPED_TRACE(name);
    const nlohmann::json ref = nlohmann::json::parse(ReadAll(kDir + "/ref/" + name + ".json"));
    const std::vector<int32_t> want = ref.at("prompt_ids").get<std::vector<int32_t>>();
    auto got = (*tok)->Encode(ref.at("prompt_text").get<std::string>(), /*add_special_tokens=*/true);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, want);
    auto plain = (*tok)->Encode(ref.at("prompt_text").get<std::string>());
    ASSERT_TRUE(plain.ok());
    EXPECT_EQ(*plain, std::vector<int32_t>(want.begin() + 1, want.end()));
    std::vector<int32_t> all = want;
    for (int32_t id : ref.at("greedy_ids").get<std::vector<int32_t>>()) all.push_back(id);
    auto text = (*tok)->Decode(all, /*skip_special_tokens=*/true);
    ASSERT_TRUE(text.ok());
    EXPECT_EQ(*text, ref.at("full_text").get<std::string>());
  }
  EXPECT_EQ((*tok)->Decode(std::vector<int32_t>{512}).status().code(), absl::StatusCode::kOutOfRange);
  // A tokenizer.json beginning with a UTF-8 BOM is still JSON, not llama2.c's.
  const std::string bom = ::testing::TempDir() + "/bom_tokenizer.json";
  std::ofstream(bom, std::ios::binary) << "\xEF\xBB\xBF{\"model\": 1}";
  auto bom_err = HfTokenizer::Load(bom);
  ASSERT_FALSE(bom_err.ok());
  EXPECT_THAT(bom_err.status().message(), ::testing::Not(HasSubstr("llama2.c"))) << bom_err.status();
  // A file that is neither: named as both.
  const std::string bad = ::testing::TempDir() + "/not_a_tokenizer.bin";
  std::ofstream(bad, std::ios::binary) << "\x01\x02";
  auto err = HfTokenizer::Load(bad);
  ASSERT_FALSE(err.ok());
  EXPECT_THAT(err.status().message(), HasSubstr("is not a tokenizer.json, nor a llama2.c tokenizer.bin"));
}

TEST(Llama2cTokenizer, BytesWithoutAPieceFallBackAndMergesPreferTheHigherScore) {
  auto tok = Llama2cTokenizer::Open(kDir + "/tok512.bin");
  ASSERT_TRUE(tok.ok());
  // "中" (three UTF-8 bytes) has no piece in this 512-token vocabulary: its bytes + 3.
  const std::vector<int32_t> e = tok->Encode("\xE4\xB8\xAD", false, false);
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(tok->piece(e[0]), " ");  // the dummy prefix
  EXPECT_EQ(e[1], 0xE4 + 3);
  EXPECT_EQ(e[2], 0xB8 + 3);
  EXPECT_EQ(e[3], 0xAD + 3);
  EXPECT_EQ(tok->Decode(e), " \xE4\xB8\xAD");  // the space, then the bytes
  // "é" has a piece of its own (id 485): one token.
  EXPECT_EQ(tok->Encode("\xC3\xA9", false, false).size(), 2u);
  EXPECT_EQ(tok->Encode("", true, true), (std::vector<int32_t>{1, 2}));
  // Every merge made is a piece; none of the adjacent pairs left is one.
  const std::vector<int32_t> ids = tok->Encode("Lily and Ben", false, false);
  for (size_t i = 0; i + 1 < ids.size(); ++i) {
    const std::string pair = tok->piece(ids[i]) + tok->piece(ids[i + 1]);
    for (int32_t k = 0; k < tok->vocab_size(); ++k) EXPECT_NE(tok->piece(k), pair) << pair;
  }
}

TEST(Llama2cTokenizer, FilesThatAreNotTokenizersAreNamed) {
  const std::string dir = ::testing::TempDir();
  const std::string bytes = ReadAll(kDir + "/tok512.bin");
  { std::ofstream(dir + "/cut_tok.bin", std::ios::binary) << bytes.substr(0, bytes.size() - 3); }
  EXPECT_THAT(Llama2cTokenizer::Open(dir + "/cut_tok.bin").status().message(), HasSubstr("inside token 511"));
  EXPECT_THAT(Llama2cTokenizer::Open(kDir + "/stories260K.bin").status().message(), HasSubstr("stories260K.bin"));
  {
    // Well-formed files: three distinct tokens (no byte fallback), and a piece given twice.
    auto file = [](const std::vector<std::string>& pieces) {
      std::string out;
      auto put = [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
      const int32_t max_len = 7;
      const float score = 0;
      put(&max_len, 4);
      for (const std::string& piece : pieces) {
        const int32_t len = static_cast<int32_t>(piece.size());
        put(&score, 4);
        put(&len, 4);
        out += piece;
      }
      return out;
    };
    std::ofstream(dir + "/few_tok.bin", std::ios::binary) << file({"a", "b", "c"});
    std::ofstream(dir + "/twice_tok.bin", std::ios::binary) << file({"a", "b", "a"});
  }
  EXPECT_THAT(Llama2cTokenizer::Open(dir + "/twice_tok.bin").status().message(),
              HasSubstr("token 2 repeats the piece of token 0"));
  EXPECT_THAT(Llama2cTokenizer::Open(dir + "/few_tok.bin").status().message(), HasSubstr("at least 259"));
}

}  // namespace
}  // namespace zt::data
