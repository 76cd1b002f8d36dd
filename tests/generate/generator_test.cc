// generate/generator.h against the references of a model zerotorch did not
// write: Karpathy's pretrained stories260K and llama2.c run.c's 40 greedy
// tokens for each fixture prompt (tests/fixtures/llama2c-stories260K/ref).
// Loaded from the llama2.c file and from the HF folder (model_source.h),
// greedy over the KV cache must give run.c's ids and text exactly; the KV
// cache path must give the same tokens as the full forward per token (the
// reference path), greedy and sampled with one seed; and the stop rules
// (an end id, a stop string, the model's last position) end it as documented.
#include "generate/generator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "generate/model_source.h"

namespace zt::generate {
namespace {

const std::string kFixture = std::string(ZT_SOURCE_DIR) + "/tests/fixtures/llama2c-stories260K";

nlohmann::json Ref(const std::string& name) {
  return nlohmann::json::parse(std::ifstream(kFixture + "/ref/" + name + ".json"));
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::unique_ptr<data::HfTokenizer> Tokenizer() {
  auto t = data::HfTokenizer::Load(kFixture + "/tok512.bin");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

class GreedyEqualsRunC : public ::testing::TestWithParam<std::string> {};

TEST_P(GreedyEqualsRunC, ForEveryPrompt) {
  auto g = OpenGenerationModel(kFixture + "/" + GetParam());
  ASSERT_TRUE(g.ok()) << g.status();
  auto tok = Tokenizer();
  ASSERT_NE(tok, nullptr);
  GenerateOptions o;
  o.max_new_tokens = 40;
  for (const std::string name : {"once_upon_a_time", "lily_and_ben", "sun_was_shining", "fixed_ids64"}) {
    SCOPED_TRACE(name);
    const nlohmann::json ref = Ref(name);
    std::vector<int32_t> prompt = ref.at("prompt_ids").get<std::vector<int32_t>>();
    if (ref.contains("prompt_text") && ref["prompt_text"].is_string()) {
      // The prompt as a user gives it: text, encoded with BOS.
      auto ids = tok->Encode(ref["prompt_text"].get<std::string>(), /*add_special_tokens=*/true);
      ASSERT_TRUE(ids.ok());
      ASSERT_EQ(*ids, prompt);
    }
    std::string streamed;
    auto r = Generate(*g->model, prompt, o, DecodeWith(tok.get()), [&](const std::string& s) { streamed += s; });
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->ids, ref.at("greedy_ids").get<std::vector<int32_t>>());
    EXPECT_EQ(r->finish, "length");
    EXPECT_EQ(r->decode_steps, 39);
    EXPECT_EQ(streamed, r->text);
    if (ref.contains("prompt_text") && ref["prompt_text"].is_string()) {
      EXPECT_EQ(r->text, ReadAll(kFixture + "/ref/" + name + ".greedy_text.txt"));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(FromTheLlama2cFileAndTheHfFolder, GreedyEqualsRunC,
                         ::testing::Values("stories260K.bin", "hf"));

TEST(Generate, TheKvCacheGivesTheFullForwardsTokens) {
  auto g = OpenGenerationModel(kFixture + "/stories260K.bin");
  ASSERT_TRUE(g.ok()) << g.status();
  auto tok = Tokenizer();
  const std::vector<int32_t> prompt = Ref("lily_and_ben").at("prompt_ids").get<std::vector<int32_t>>();
  for (const SamplingOptions& s : {SamplingOptions{}, SamplingOptions{0.9, 40, 0.95, 5}}) {
    GenerateOptions cached, full;
    cached.max_new_tokens = full.max_new_tokens = 60;
    cached.sampling = full.sampling = s;
    full.use_cache = false;
    auto a = Generate(*g->model, prompt, cached, DecodeWith(tok.get()));
    auto b = Generate(*g->model, prompt, full, DecodeWith(tok.get()));
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->ids, b->ids) << "temperature " << s.temperature;
    EXPECT_EQ(a->text, b->text);
  }
}

TEST(Generate, StopRulesEndTheText) {
  auto g = OpenGenerationModel(kFixture + "/stories260K.bin");
  ASSERT_TRUE(g.ok()) << g.status();
  auto tok = Tokenizer();
  const nlohmann::json ref = Ref("once_upon_a_time");
  const std::vector<int32_t> prompt = ref.at("prompt_ids").get<std::vector<int32_t>>();
  const std::vector<int32_t> greedy = ref.at("greedy_ids").get<std::vector<int32_t>>();
  GenerateOptions o;
  o.max_new_tokens = 40;
  // The 6th greedy token as an end id: five tokens come out.
  o.stop_ids = {greedy[5]};
  auto r = Generate(*g->model, prompt, o, DecodeWith(tok.get()));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->finish, "stop_id");
  EXPECT_EQ(r->ids, std::vector<int32_t>(greedy.begin(), greedy.begin() + 5));
  // A stop string: the text before it.
  o.stop_ids.clear();
  o.stop = {" named"};
  r = Generate(*g->model, prompt, o, DecodeWith(tok.get()));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->finish, "stop_text");
  EXPECT_EQ(r->text, ", there was a little girl");
  // The model's last position (512): a prompt of 508 ids leaves 4.
  o.stop.clear();
  o.max_new_tokens = 100;
  std::vector<int32_t> long_prompt(508, 300);
  long_prompt[0] = 1;
  r = Generate(*g->model, long_prompt, o, DecodeWith(tok.get()));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->finish, "positions");
  EXPECT_EQ(r->ids.size(), 4u);
}

// vocab_limit: ids past a tokenizer's vocabulary are never chosen, even
// where they score highest.
TEST(Generate, TokensPastTheVocabularyLimitAreNeverChosen) {
  auto g = OpenGenerationModel(kFixture + "/stories260K.bin");
  ASSERT_TRUE(g.ok());
  const std::vector<int32_t> prompt = Ref("once_upon_a_time").at("prompt_ids").get<std::vector<int32_t>>();
  GenerateOptions o;
  o.max_new_tokens = 20;
  auto free = Generate(*g->model, prompt, o);
  ASSERT_TRUE(free.ok());
  const int32_t top = *std::max_element(free->ids.begin(), free->ids.end());
  o.vocab_limit = top;  // the largest id it chose is now out of range
  auto limited = Generate(*g->model, prompt, o);
  ASSERT_TRUE(limited.ok());
  for (int32_t id : limited->ids) EXPECT_LT(id, top);
  EXPECT_NE(limited->ids, free->ids);
}

TEST(Generate, BadPromptsAreNamed) {
  auto g = OpenGenerationModel(kFixture + "/stories260K.bin");
  ASSERT_TRUE(g.ok());
  GenerateOptions o;
  EXPECT_NE(Generate(*g->model, {}, o).status().message().find("no tokens"), std::string::npos);
  EXPECT_NE(Generate(*g->model, {1, 512}, o).status().message().find("token id 512"), std::string::npos);
  EXPECT_NE(Generate(*g->model, std::vector<int32_t>(513, 5), o).status().message().find("513 tokens"),
            std::string::npos);
  o.stop = {"x"};
  EXPECT_NE(Generate(*g->model, {1}, o).status().message().find("need a tokenizer"), std::string::npos);
}

TEST(ModelSource, MissingAndWrongPathsAreNamed) {
  auto missing = OpenGenerationModel("/nonexistent/model");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("does not exist"), std::string::npos);
  auto no_config = OpenGenerationModel(kFixture + "/ref");
  ASSERT_FALSE(no_config.ok());
  EXPECT_NE(no_config.status().message().find("no config.json in it"), std::string::npos) << no_config.status();
}

}  // namespace
}  // namespace zt::generate
