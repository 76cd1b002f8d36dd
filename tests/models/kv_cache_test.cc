// Model::ForwardCached (the KV cache generation runs on) against the plain
// full-sequence Forward, its reference: the logits of a sequence fed in
// pieces (a prompt, then one token at a time, then a few at once) equal the
// full forward's at every position, for GPT-2, LLaMA with grouped-query
// attention, and the real pretrained stories260K. The bound: both compute
// the same fp32 sums in another order (attention over cached keys, rotary
// rows gathered per position), so they differ by rounding only: a few ulps
// of the largest logit; 1e-5 relative to it is far below any modelling
// error (a wrong position or a key missing from the cache moves logits by
// 1e-2 and more, the mutation cases below).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "engine/weights.h"
#include "models/registry.h"
#include "util/error.h"

namespace zt::models {
namespace {

const std::string kFixture = std::string(ZT_SOURCE_DIR) + "/tests/fixtures/llama2c-stories260K";

std::unique_ptr<Model> Build(const std::string& name) {
  absl::StatusOr<std::unique_ptr<Model>> m = CreateModel(ModelSpec{name, {}, 7});
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return nullptr;
  (*m)->module()->eval();
  return std::move(*m);
}

// The logits of `ids` fed to ForwardCached in pieces of the sizes in
// `pieces` (the rest one token at a time), concatenated: [1, T, vocab].
torch::Tensor Incremental(Model& m, const torch::Tensor& ids, const std::vector<int64_t>& pieces) {
  KvCache cache;
  std::vector<torch::Tensor> out;
  int64_t at = 0;
  size_t k = 0;
  while (at < ids.size(1)) {
    const int64_t n = std::min<int64_t>(k < pieces.size() ? pieces[k++] : 1, ids.size(1) - at);
    out.push_back(m.ForwardCached(ids.narrow(1, at, n), cache));
    at += n;
    EXPECT_EQ(cache.length(), at);
  }
  return torch::cat(out, 1);
}

void ExpectMatchesFullForward(Model& m, int64_t t, int64_t batch = 1) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(3);
  const torch::Tensor ids = torch::randint(0, m.info().vocab_size, {batch, t}, torch::kLong);
  const torch::Tensor full = m.Forward(ids);
  for (const std::vector<int64_t>& pieces : std::vector<std::vector<int64_t>>{{t}, {5}, {1}, {7, 1, 1, 3}}) {
    const torch::Tensor inc = Incremental(m, ids, pieces);
    ASSERT_EQ(inc.sizes(), full.sizes());
    const double scale = full.abs().max().item<double>();
    EXPECT_LE((inc - full).abs().max().item<double>(), 1e-5 * scale)
        << m.info().name << " pieces starting " << pieces[0];
  }
}

TEST(KvCache, Gpt2MatchesFullForward) {
  auto m = Build("gpt2-tiny");
  ASSERT_NE(m, nullptr);
  ExpectMatchesFullForward(*m, 40);
  ExpectMatchesFullForward(*m, 17, /*batch=*/3);
}

TEST(KvCache, LlamaWithGroupedQueryAttentionMatchesFullForward) {
  auto m = Build("llama-tiny");  // 4 query heads on 2 kv heads
  ASSERT_NE(m, nullptr);
  ExpectMatchesFullForward(*m, 40);
  ExpectMatchesFullForward(*m, 17, /*batch=*/2);
}

TEST(KvCache, PretrainedStories260KMatchesFullForward) {
  auto m = Build(kFixture + "/hf");
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(LoadSafetensors(*m->module(), kFixture + "/hf").ok());
  ExpectMatchesFullForward(*m, 100);
}

// The checks above could pass for a cache that is never read if a model
// ignored it; these inputs show each piece matters: the second token's
// logits with the first one cached differ from the second token alone, and
// growing the buffers (past 64 positions) keeps what was cached.
TEST(KvCache, CachedPositionsChangeTheResult) {
  torch::NoGradGuard no_grad;
  for (const std::string name : {"gpt2-tiny", "llama-tiny"}) {
    auto m = Build(name);
    ASSERT_NE(m, nullptr);
    const torch::Tensor ids = torch::tensor({{5, 9}}, torch::kLong);
    KvCache cache;
    m->ForwardCached(ids.narrow(1, 0, 1), cache);
    const torch::Tensor second = m->ForwardCached(ids.narrow(1, 1, 1), cache);
    KvCache empty;
    const torch::Tensor alone = m->ForwardCached(ids.narrow(1, 1, 1), empty);
    EXPECT_GT((second - alone).abs().max().item<double>(), 1e-3) << name;
    EXPECT_GT(cache.nbytes(), 0);
  }
}

TEST(KvCache, PassingTheModelsPositionsIsANamedError) {
  auto m = Build("gpt2-tiny");  // 128 positions
  ASSERT_NE(m, nullptr);
  torch::NoGradGuard no_grad;
  KvCache cache;
  m->ForwardCached(torch::zeros({1, 120}, torch::kLong), cache);
  try {
    m->ForwardCached(torch::zeros({1, 9}, torch::kLong), cache);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("120 cached positions and 9 new ones pass the model's 128"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(cache.length(), 120);  // the failed call cached nothing
}

TEST(KvCache, ClassifiersDoNotGenerate) {
  auto m = Build("bert-tiny");
  ASSERT_NE(m, nullptr);
  KvCache cache;
  try {
    m->ForwardCached(torch::zeros({1, 4}, torch::kLong), cache);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), absl::StatusCode::kUnimplemented) << e.what();
  }
}

}  // namespace
}  // namespace zt::models
