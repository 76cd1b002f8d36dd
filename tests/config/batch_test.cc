// Batch-size arithmetic: every branch of DeepSpeed's derivation rules and
// every error branch, through ResolveBatch directly and through the parser.
#include <gtest/gtest.h>

#include "tests/config/config_test_util.h"

namespace zt {
namespace {

struct Given {
  std::optional<int64_t> batch, micro, gas;
};

BatchConfig Resolve(Given g, int world, absl::Status* status) {
  BatchConfig b;
  b.train_batch_size = g.batch;
  b.train_micro_batch_size_per_gpu = g.micro;
  b.gradient_accumulation_steps = g.gas;
  *status = ResolveBatch(b, world);
  return b;
}

void ExpectResolved(Given g, int world, int64_t batch, int64_t micro, int64_t gas) {
  absl::Status status;
  BatchConfig b = Resolve(g, world, &status);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(b.train_batch, batch);
  EXPECT_EQ(b.micro_batch, micro);
  EXPECT_EQ(b.accumulation_steps, gas);
  EXPECT_EQ(b.world_size, world);
  EXPECT_EQ(b.train_batch, b.micro_batch * b.accumulation_steps * world);
}

std::string ErrorOf(Given g, int world) {
  absl::Status status;
  Resolve(g, world, &status);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  return std::string(status.message());
}

TEST(ResolveBatch, AllThreeConsistent) { ExpectResolved({96, 4, 3}, 8, 96, 4, 3); }

TEST(ResolveBatch, BatchAndMicroDeriveAccumulation) { ExpectResolved({64, 4, std::nullopt}, 4, 64, 4, 4); }

TEST(ResolveBatch, BatchAndAccumulationDeriveMicro) { ExpectResolved({64, std::nullopt, 2}, 4, 64, 8, 2); }

TEST(ResolveBatch, MicroAndAccumulationDeriveBatch) { ExpectResolved({std::nullopt, 6, 5}, 3, 90, 6, 5); }

TEST(ResolveBatch, OnlyBatch) { ExpectResolved({32, std::nullopt, std::nullopt}, 4, 32, 8, 1); }

TEST(ResolveBatch, OnlyMicro) { ExpectResolved({std::nullopt, 7, std::nullopt}, 3, 21, 7, 1); }

TEST(ResolveBatch, WorldSizeOne) { ExpectResolved({10, std::nullopt, std::nullopt}, 1, 10, 10, 1); }

TEST(ResolveBatch, InconsistentPrintsTheEquation) {
  EXPECT_EQ(ErrorOf({32, 3, 2}, 4),
            "train_batch_size 32 != train_micro_batch_size_per_gpu 3 * gradient_accumulation_steps 2 * world size 4 "
            "(= 24); change one of them, or drop train_batch_size to have it derived");
}

TEST(ResolveBatch, BatchNotDivisibleByMicroTimesWorld) {
  EXPECT_EQ(ErrorOf({30, 4, std::nullopt}, 2),
            "train_batch_size 30 is not divisible by train_micro_batch_size_per_gpu 4 * world size 2 (= 8), so "
            "gradient_accumulation_steps cannot be derived; make train_batch_size a multiple of 8 (e.g. 24 or 32) "
            "or change train_micro_batch_size_per_gpu");
  // Smaller than one micro-batch per rank: only the upper multiple is a suggestion.
  EXPECT_NE(ErrorOf({4, 8, std::nullopt}, 1).find("a multiple of 8 (e.g. 8)"), std::string::npos);
}

TEST(ResolveBatch, BatchNotDivisibleByWorldTimesAccumulation) {
  EXPECT_EQ(ErrorOf({30, std::nullopt, 2}, 4),
            "train_batch_size 30 is not divisible by world size 4 * gradient_accumulation_steps 2 (= 8), so "
            "train_micro_batch_size_per_gpu cannot be derived; make train_batch_size a multiple of 8 (e.g. 24 or "
            "32) or change gradient_accumulation_steps");
}

TEST(ResolveBatch, OnlyBatchNotDivisibleByWorld) {
  EXPECT_EQ(ErrorOf({30, std::nullopt, std::nullopt}, 4),
            "train_batch_size 30 is not divisible by world size 4, so train_micro_batch_size_per_gpu cannot be "
            "derived (with gradient_accumulation_steps 1); make train_batch_size a multiple of 4 (e.g. 28 or 32) "
            "or give train_micro_batch_size_per_gpu and gradient_accumulation_steps");
}

TEST(ResolveBatch, NeitherBatchNorMicro) {
  EXPECT_EQ(ErrorOf({std::nullopt, std::nullopt, 4}, 1),
            "give train_batch_size or train_micro_batch_size_per_gpu (gradient_accumulation_steps alone does not "
            "fix the batch size); e.g. \"train_micro_batch_size_per_gpu\": 8");
  EXPECT_EQ(ErrorOf({std::nullopt, std::nullopt, std::nullopt}, 1),
            "give train_batch_size or train_micro_batch_size_per_gpu; e.g. \"train_micro_batch_size_per_gpu\": 8");
}

TEST(ResolveBatch, NonPositiveValues) {
  EXPECT_EQ(ErrorOf({0, std::nullopt, std::nullopt}, 1), "train_batch_size must be > 0, got 0");
  EXPECT_EQ(ErrorOf({std::nullopt, -2, std::nullopt}, 1), "train_micro_batch_size_per_gpu must be > 0, got -2");
  EXPECT_EQ(ErrorOf({8, std::nullopt, 0}, 1), "gradient_accumulation_steps must be > 0, got 0");
  EXPECT_EQ(ErrorOf({8, std::nullopt, std::nullopt}, 0), "the world size must be >= 1, got 0");
}

TEST(ResolveBatch, OverflowIsAnErrorNotWrapAround) {
  EXPECT_NE(ErrorOf({std::nullopt, int64_t{1} << 40, int64_t{1} << 30}, 1024).find("more than 2^63"),
            std::string::npos);
}

TEST(ResolveBatch, ThroughTheParserWithTheWorldSize) {
  ParseResult r = testing::Parse(R"({"train_batch_size": 256, "gradient_accumulation_steps": 4})", 8);
  ASSERT_TRUE(r.config) << testing::ErrorsText(r);
  EXPECT_EQ(r.config->batch.micro_batch, 8);
  EXPECT_EQ(r.config->batch.train_batch_size, 256);
  EXPECT_FALSE(r.config->batch.train_micro_batch_size_per_gpu.has_value());
  ParseResult other_world = testing::Parse(R"({"train_batch_size": 256, "gradient_accumulation_steps": 4})", 6);
  ASSERT_EQ(other_world.errors.size(), 1u);
  EXPECT_EQ(other_world.errors[0].path, "train_batch_size");
  EXPECT_NE(other_world.errors[0].message.find("world size 6 * gradient_accumulation_steps 4 (= 24)"),
            std::string::npos);
}

}  // namespace
}  // namespace zt
