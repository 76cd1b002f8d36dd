// llama2.c model files (ckpt/format/llama2c.h) against the fixture's Hugging Face
// folder, which was converted from the same file independently
// (tests/fixtures/llama2c-stories260K/README.md) and checked against run.c's
// logits: every tensor bit for bit, the config's sizes, and named errors for
// files that are not what their header says. A version-1 file is built from
// the legacy one (the same arrays, export.py's version-1 order) and must
// read to the same tensors.
#include "ckpt/format/llama2c.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "ckpt/format/safetensors.h"
#include "nlohmann/json.hpp"
#include "tests/testing/scratch_dir.h"
#include "tests/testing/zt_command.h"

namespace zt::ckpt {
namespace {

using ::testing::HasSubstr;

const std::string kDir = std::string(ZT_SOURCE_DIR) + "/tests/fixtures/llama2c-stories260K";

std::vector<char> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteAll(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// name -> (shape, bytes) of every tensor in a safetensors file.
std::map<std::string, std::pair<std::vector<int64_t>, std::vector<char>>> Tensors(const std::string& path) {
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<char>>> out;
  auto r = SafetensorsReader::Open(path);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return out;
  for (const auto& t : (*r)->tensors()) {
    std::vector<char> bytes(t.nbytes);
    EXPECT_TRUE((*r)->Read(t, bytes.data()).ok());
    out[t.name] = {t.shape, std::move(bytes)};
  }
  return out;
}

TEST(Llama2c, LegacyFileReadsAsTheFixturesHfFolderBitForBit) {
  auto m = OpenLlama2c(kDir + "/stories260K.bin");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->version, 0);
  EXPECT_EQ(m->dim, 64);
  EXPECT_EQ(m->hidden_dim, 172);
  EXPECT_EQ(m->n_layers, 5);
  EXPECT_EQ(m->n_heads, 8);
  EXPECT_EQ(m->n_kv_heads, 4);
  EXPECT_EQ(m->vocab_size, 512);
  EXPECT_TRUE(m->shared_classifier);
  zt::testing::ScratchDir tmp("zt_llama2c");
  ASSERT_TRUE(WriteLlama2cAsHf(*m, tmp.path() + "/hf").ok());
  const auto ours = Tensors(tmp.path() + "/hf/model.safetensors");
  const auto want = Tensors(kDir + "/hf/model.safetensors");
  ASSERT_EQ(ours.size(), want.size());
  EXPECT_EQ(ours.size(), 1u + 5 * 9 + 1);  // no lm_head: tied
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(ours.count(name)) << name;
    EXPECT_EQ(ours.at(name).first, t.first) << name;
    EXPECT_TRUE(ours.at(name).second == t.second) << name << " differs";
  }
  const nlohmann::json c = nlohmann::json::parse(ReadAll(tmp.path() + "/hf/config.json"));
  const nlohmann::json f = nlohmann::json::parse(ReadAll(kDir + "/hf/config.json"));
  for (const char* key :
       {"architectures", "model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "head_dim", "vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta",
        "hidden_act", "tie_word_embeddings", "bos_token_id", "eos_token_id"}) {
    EXPECT_EQ(c.at(key), f.at(key)) << key;
  }
  // A folder that already holds something is not written into.
  EXPECT_THAT(WriteLlama2cAsHf(*m, tmp.path() + "/hf").message(), HasSubstr("is not empty"));
}

TEST(Llama2c, TheRopeRowOrderIsWhatMakesItEqual) {
  // Without the per-head reordering q_proj would differ: the check above can fail.
  auto m = OpenLlama2c(kDir + "/stories260K.bin");
  ASSERT_TRUE(m.ok());
  for (Llama2cModel::Tensor& t : m->tensors) t.rope_heads = 0;
  zt::testing::ScratchDir tmp("zt_llama2c");
  ASSERT_TRUE(WriteLlama2cAsHf(*m, tmp.path() + "/hf").ok());
  const auto ours = Tensors(tmp.path() + "/hf/model.safetensors");
  const auto want = Tensors(kDir + "/hf/model.safetensors");
  EXPECT_FALSE(ours.at("model.layers.0.self_attn.q_proj.weight").second ==
               want.at("model.layers.0.self_attn.q_proj.weight").second);
  EXPECT_TRUE(ours.at("model.layers.0.self_attn.v_proj.weight").second ==
              want.at("model.layers.0.self_attn.v_proj.weight").second);
}

// export.py's version 1 of the same weights: magic, version, the 7 sizes,
// the shared-classifier byte, padding to 256; the norms first, no RoPE tables.
std::vector<char> Version1Of(const std::vector<char>& legacy) {
  const int64_t d = 64, hd = 172, L = 5, kv = 32, V = 512, S = 512, hs = 8;
  std::vector<int64_t> sizes = {V * d,      L * d,      L * d * d,  L * kv * d, L * kv * d, L * d * d, L * d,
                                L * hd * d, L * d * hd, L * hd * d, d,          S * hs / 2, S * hs / 2};
  std::vector<const char*> arrays;
  const char* p = legacy.data() + 28;
  for (int64_t n : sizes) {
    arrays.push_back(p);
    p += n * 4;
  }
  std::vector<char> out(256, 0);
  const uint32_t magic = 0x616b3432;
  const int32_t version = 1;
  std::memcpy(out.data(), &magic, 4);
  std::memcpy(out.data() + 4, &version, 4);
  std::memcpy(out.data() + 8, legacy.data(), 28);
  out[36] = 1;
  // rms_att, rms_ffn, rms_final, embedding, wq, wk, wv, wo, w1, w2, w3
  for (int i : {1, 6, 10, 0, 2, 3, 4, 5, 7, 8, 9}) {
    out.insert(out.end(), arrays[static_cast<size_t>(i)], arrays[static_cast<size_t>(i)] + sizes[i] * 4);
  }
  return out;
}

TEST(Llama2c, VersionOneReadsToTheSameTensors) {
  zt::testing::ScratchDir tmp("zt_llama2c");
  WriteAll(tmp.path() + "/v1.bin", Version1Of(ReadAll(kDir + "/stories260K.bin")));
  auto m = OpenLlama2c(tmp.path() + "/v1.bin");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->version, 1);
  ASSERT_TRUE(WriteLlama2cAsHf(*m, tmp.path() + "/hf").ok());
  const auto ours = Tensors(tmp.path() + "/hf/model.safetensors");
  const auto want = Tensors(kDir + "/hf/model.safetensors");
  ASSERT_EQ(ours.size(), want.size());
  for (const auto& [name, t] : want) EXPECT_TRUE(ours.at(name).second == t.second) << name;
}

TEST(Llama2c, FilesThatAreNotWhatTheirHeaderSaysAreNamed) {
  zt::testing::ScratchDir tmp("zt_llama2c");
  const std::vector<char> legacy = ReadAll(kDir + "/stories260K.bin");
  std::vector<char> cut(legacy.begin(), legacy.end() - 100);
  WriteAll(tmp.path() + "/cut.bin", cut);
  EXPECT_THAT(OpenLlama2c(tmp.path() + "/cut.bin").status().message(),
              HasSubstr("needs 1056540 bytes, the file has 1056440 (truncated)"));
  std::vector<char> longer = legacy;
  longer.resize(legacy.size() + 4);
  WriteAll(tmp.path() + "/long.bin", longer);
  EXPECT_THAT(OpenLlama2c(tmp.path() + "/long.bin").status().message(), HasSubstr("(longer)"));
  // A classifier of its own (negative vocab_size) needs its bytes too.
  std::vector<char> own = legacy;
  const int32_t minus = -512;
  std::memcpy(own.data() + 20, &minus, 4);
  WriteAll(tmp.path() + "/own.bin", own);
  EXPECT_THAT(OpenLlama2c(tmp.path() + "/own.bin").status().message(), HasSubstr("own classifier) needs 1187612"));
  std::vector<char> bad = legacy;
  const int32_t zero = 0;
  std::memcpy(bad.data() + 12, &zero, 4);  // n_heads
  WriteAll(tmp.path() + "/bad.bin", bad);
  EXPECT_THAT(OpenLlama2c(tmp.path() + "/bad.bin").status().message(), HasSubstr("header field n_heads is 0"));
  std::vector<char> v2 = Version1Of(legacy);
  const int32_t two = 2;
  std::memcpy(v2.data() + 4, &two, 4);
  WriteAll(tmp.path() + "/v2.bin", v2);
  EXPECT_THAT(OpenLlama2c(tmp.path() + "/v2.bin").status().message(), HasSubstr("version 2 (int8 groups"));
  WriteAll(tmp.path() + "/tiny.bin", std::vector<char>(10, 'x'));
  EXPECT_THAT(OpenLlama2c(tmp.path() + "/tiny.bin").status().message(), HasSubstr("too short"));
  EXPECT_FALSE(LooksLikeLlama2c(tmp.path() + "/tiny.bin"));
  EXPECT_TRUE(LooksLikeLlama2c(kDir + "/stories260K.bin"));
}

TEST(Llama2c, ZtCkptConvertWritesTheHfFolder) {
  zt::testing::ScratchDir tmp("zt_llama2c");
  const zt::testing::ZtRun r =
      zt::testing::RunZt("ckpt convert " + kDir + "/stories260K.bin " + tmp.path() + "/hf --to hf");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("llama2.c"));
  const auto ours = Tensors(tmp.path() + "/hf/model.safetensors");
  const auto want = Tensors(kDir + "/hf/model.safetensors");
  ASSERT_EQ(ours.size(), want.size());
  for (const auto& [name, t] : want) EXPECT_TRUE(ours.at(name).second == t.second) << name;
  const zt::testing::ZtRun bad =
      zt::testing::RunZt("ckpt convert " + kDir + "/tok512.bin " + tmp.path() + "/x --to hf");
  EXPECT_NE(bad.code, 0) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("header field hidden_dim is 0"));
  EXPECT_THAT(bad.output, HasSubstr("tok512.bin"));
}

}  // namespace
}  // namespace zt::ckpt
