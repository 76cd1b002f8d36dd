// `zt generate` as a user runs it, on the pretrained stories260K
// (tests/fixtures/llama2c-stories260K): from the llama2.c file with its
// tokenizer.bin, stdout is run.c's greedy text for each prompt; from ids;
// and from what `zt train` writes when it fine-tunes the model at stage 3
// on 2 ranks (started from the llama2.c file itself): the checkpoint
// (shards gathered in memory) continues exactly as the export does, and a
// LoRA run's adapter folder on its base as the run's checkpoint with the
// adapters merged. Bad input exits 2 naming what is wrong.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/testing/zt_command.h"

namespace zt {
namespace {

const std::string kFixture = std::string(ZT_SOURCE_DIR) + "/tests/fixtures/llama2c-stories260K";
const std::string kZt = std::string(ZT_BINARY_DIR) + "/bin/zt";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string TempDir(const std::string& name) {
  std::string base = ::testing::TempDir();
  if (!base.empty() && base.back() == '/') base.pop_back();
  std::string tmpl = absl::StrCat(base, "/zt_generate_", name, "_XXXXXX");
  EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

struct GenRun {
  int code = -1;
  std::string out, err;
};

// stdout and stderr apart.
GenRun Generate(const std::string& args) {
  const std::string err = TempDir("err") + "/stderr";
  zt::testing::ZtRun r =
      zt::testing::RunShell(absl::StrCat("{ OMP_NUM_THREADS=1 ", kZt, " generate ", args, " 2>", err, "; }"));
  return {r.code, r.output, ReadAll(err)};
}

std::vector<int32_t> JsonIds(const GenRun& r) {
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_TRUE(j.is_object()) << r.out << r.err;
  return j.is_object() ? j.at("ids").get<std::vector<int32_t>>() : std::vector<int32_t>{};
}

nlohmann::json Ref(const std::string& name) {
  return nlohmann::json::parse(ReadAll(kFixture + "/ref/" + name + ".json"));
}

TEST(ZtGenerate, Llama2cFileGivesRunCsGreedyText) {
  for (const std::string name : {"once_upon_a_time", "lily_and_ben", "sun_was_shining"}) {
    SCOPED_TRACE(name);
    const nlohmann::json ref = Ref(name);
    const GenRun r = Generate(absl::StrCat("--model ", kFixture, "/stories260K.bin --tokenizer ", kFixture,
                                           "/tok512.bin --max-new-tokens 40 --prompt '",
                                           ref.at("prompt_text").get<std::string>(), "'"));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, ReadAll(kFixture + "/ref/" + name + ".greedy_text.txt") + "\n");
    EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << r.err;
  }
  // The fixed id sequence, without a tokenizer: the ids.
  const nlohmann::json ref = Ref("fixed_ids64");
  std::string ids;
  for (int32_t id : ref.at("prompt_ids").get<std::vector<int32_t>>()) absl::StrAppend(&ids, ids.empty() ? "" : ",", id);
  const GenRun r = Generate(
      absl::StrCat("--model ", kFixture, "/stories260K.bin --prompt-ids ", ids, " --max-new-tokens 40 --output json"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(JsonIds(r), ref.at("greedy_ids").get<std::vector<int32_t>>());
}

TEST(ZtGenerate, BadInputIsNamed) {
  const std::string m = absl::StrCat("--model ", kFixture, "/stories260K.bin ");
  GenRun r = Generate(m + "--prompt 'Once'");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("pass --tokenizer"), std::string::npos) << r.err;
  r = Generate(m + "--tokenizer " + kFixture + "/tok512.bin --prompt x --temperature -1");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--temperature"), std::string::npos) << r.err;
  r = Generate(m + "--prompt-ids 1,x --output json");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("'x' is not a token id"), std::string::npos) << r.err;
  r = Generate("--model /nonexistent --prompt x");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  // A truncated llama2.c file: the header against the size.
  const std::string dir = TempDir("bad");
  const std::string bin = ReadAll(kFixture + "/stories260K.bin");
  std::ofstream(dir + "/cut.bin", std::ios::binary) << bin.substr(0, bin.size() - 4);
  r = Generate(absl::StrCat("--model ", dir, "/cut.bin --prompt-ids 1 --output json"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("cut.bin"), std::string::npos) << r.err;
}

// A short story text in TinyStories' style, tokenized with tok512.bin.
std::string MakeTokens(const std::string& dir) {
  std::ofstream(dir + "/story.txt") << [] {
    std::string s;
    for (int i = 0; i < 40; ++i) {
      s += "Tom had a red kite. He ran with it in the park. The kite went up high in the sky. Tom was happy.\n";
    }
    return s;
  }();
  const zt::testing::ZtRun r = zt::testing::RunZt(
      absl::StrCat("tokenize --tokenizer ", kFixture, "/tok512.bin --out ", dir, "/story.bin ", dir, "/story.txt"));
  EXPECT_EQ(r.code, 0) << r.output;
  return dir + "/story.bin";
}

TEST(ZtGenerate, FromWhatZtTrainWritesAtStage3OnTwoRanks) {
  const std::string dir = TempDir("train");
  const std::string data = MakeTokens(dir);
  const std::string common =
      absl::StrCat("OMP_NUM_THREADS=1 ", kZt, " train --init-from ", kFixture, "/stories260K.bin --data ", data,
                   " --seq-len 64 --stage 3 --nproc 2 --micro-batch 2 --steps 6 "
                   "--eval-interval -1 --report none");
  // The full run also samples at its final evaluation, through the stage-3
  // engine's gathers: the same continuation zt generate gives from the
  // checkpoint saved after it.
  zt::testing::ZtRun full = zt::testing::RunShell(
      absl::StrCat(common, " --lr 1e-3 --output-dir ", dir, "/full --eval-interval 0 --eval-fraction 0.2 --tokenizer ",
                   kFixture, "/tok512.bin --sample-prompts 'Tom had a' --sample-tokens 24"));
  ASSERT_EQ(full.code, 0) << full.output;
  EXPECT_NE(full.output.find("is a llama2.c model file: converted it into"), std::string::npos) << full.output;
  zt::testing::ZtRun lora = zt::testing::RunShell(
      absl::StrCat(common, " --lr 2e-2 --lora-r 4 --lora-alpha 16 --eval-interval -1 --output-dir ", dir, "/lora"));
  ASSERT_EQ(lora.code, 0) << lora.output;
  EXPECT_TRUE(std::filesystem::exists(dir + "/full/checkpoints/global_step6/config.json"));

  const std::string prompt =
      absl::StrCat(" --tokenizer ", kFixture, "/tok512.bin --prompt 'Tom had a' --max-new-tokens 24 --output json");
  const GenRun base = Generate(absl::StrCat("--model ", kFixture, "/stories260K.bin", prompt));
  const GenRun exported = Generate(absl::StrCat("--model ", dir, "/full", prompt));
  const GenRun checkpoint = Generate(absl::StrCat("--model ", dir, "/full/checkpoints", prompt));
  const GenRun tag = Generate(absl::StrCat("--model ", dir, "/full/checkpoints/global_step6", prompt));
  ASSERT_EQ(exported.code, 0) << exported.err;
  ASSERT_EQ(checkpoint.code, 0) << checkpoint.err;
  ASSERT_EQ(tag.code, 0) << tag.err;
  EXPECT_NE(checkpoint.err.find("ZeRO stage 3, 2 ranks, step 6"), std::string::npos) << checkpoint.err;
  EXPECT_EQ(JsonIds(checkpoint), JsonIds(exported));
  EXPECT_EQ(JsonIds(tag), JsonIds(exported));
  EXPECT_NE(JsonIds(exported), JsonIds(base)) << "six steps on the story changed nothing";
  {
    const std::string mark = "sample at step 6: Tom had a|";
    const size_t at = full.output.find(mark);
    ASSERT_NE(at, std::string::npos) << full.output;
    const std::string sampled = full.output.substr(at + mark.size(), full.output.find('\n', at) - at - mark.size());
    const nlohmann::json j = nlohmann::json::parse(checkpoint.out, nullptr, false);
    ASSERT_TRUE(j.is_object());
    const std::string text = j.at("text").get<std::string>();
    EXPECT_FALSE(sampled.empty());
    EXPECT_EQ(sampled, text.substr(0, text.find('\n')));
  }

  const GenRun adapter = Generate(absl::StrCat("--model ", dir, "/lora/adapter", prompt));
  const GenRun merged = Generate(absl::StrCat("--model ", dir, "/lora/checkpoints", prompt));
  ASSERT_EQ(adapter.code, 0) << adapter.err;
  ASSERT_EQ(merged.code, 0) << merged.err;
  EXPECT_NE(adapter.err.find("LoRA adapter"), std::string::npos) << adapter.err;
  EXPECT_NE(merged.err.find("LoRA merged"), std::string::npos) << merged.err;
  EXPECT_EQ(JsonIds(adapter), JsonIds(merged));
  EXPECT_NE(JsonIds(adapter), JsonIds(base));
}

}  // namespace
}  // namespace zt
