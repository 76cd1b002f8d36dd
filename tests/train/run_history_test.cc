// train/run_history.h: the curves a checkpoint carries for the report, and
// checkpoints written before the ranks' memory, gradient norm and step time
// were kept.
#include "train/run_history.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "ckpt/format/value.h"
#include "tests/testing/scratch_dir.h"

namespace zt::train {
namespace {

RunHistory TwoSteps() {
  RunHistory h;
  for (int64_t s = 1; s <= 2; ++s) {
    RunHistory::Step p;
    p.step = s;
    p.loss = 3.0 / static_cast<double>(s);
    p.lr = 1e-3;
    p.items_per_sec = 100;
    p.memory_bytes = 1e9;
    p.memory_min = 0.9e9;
    p.memory_max = 1.1e9 + static_cast<double>(s);
    p.grad_norm = 0.5 * static_cast<double>(s);
    p.step_sec = 0.25;
    p.sent_shard = 3.0 * (1 << 20);
    p.sent_across = 1.5 * (1 << 20);
    p.wait_shard = 0.004;
    p.wait_across = 0.012 * static_cast<double>(s);
    h.AddStep(p);
  }
  h.AddEval(2, 1.5, 4.48);
  return h;
}

TEST(RunHistory, RoundTripsEveryCurve) {
  const RunHistory back = RunHistory::FromValue(TwoSteps().ToValue());
  ASSERT_EQ(back.steps().size(), 2u);
  EXPECT_EQ(back.ToValue().AsDict().Find("memory_max")->AsList()[1].AsDouble(), 1.1e9 + 2);
  EXPECT_EQ(back.ToValue().AsDict().Find("grad_norm")->AsList()[0].AsDouble(), 0.5);
  EXPECT_EQ(back.ToValue().AsDict().Find("wait_across")->AsList()[1].AsDouble(), 0.024);
  EXPECT_EQ(back.ToValue().AsDict().Find("sent_across")->AsList()[1].AsDouble(), 1.5 * (1 << 20));
}

TEST(RunHistory, AnOlderCheckpointsHistoryKeepsItsCurvesAndLacksTheNewOnes) {
  ckpt::Value v = TwoSteps().ToValue();
  ckpt::Dict old;
  for (const auto& [key, value] : v.AsDict().items) {
    const std::string name = key.AsString();
    if (name != "memory_min" && name != "memory_max" && name != "grad_norm" && name != "step_time" &&
        name != "sent_shard" && name != "sent_across") {
      old.Set(key, value);
    }
  }
  const RunHistory back = RunHistory::FromValue(ckpt::Value(std::move(old)));
  ASSERT_EQ(back.steps().size(), 2u);  // not dropped for the missing curves
  EXPECT_EQ(back.losses()[1], 1.5);
  EXPECT_TRUE(std::isnan(back.ToValue().AsDict().Find("grad_norm")->AsList()[0].AsDouble()));
  // A curve of the wrong length is malformed: the whole history is dropped.
  ckpt::Value bad = TwoSteps().ToValue();
  ckpt::Dict d = bad.AsDict();
  d.Set(ckpt::Value("step_time"), ckpt::Value(ckpt::List{ckpt::Value(1.0)}));
  EXPECT_TRUE(RunHistory::FromValue(ckpt::Value(std::move(d))).steps().empty());
}

TEST(RunHistory, TheReportHasTheFinalLossesAndTheNewCharts) {
  testing::ScratchDir dir;
  const std::string path = dir.path() + "/report.html";
  ASSERT_TRUE(WriteReport(path, {"run", {{"model", "m"}}}, TwoSteps(), /*language_model=*/true).ok());
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string html = ss.str();
  EXPECT_NE(html.find("<th>final train loss</th><td>1.5000 (step 2)</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<th>final eval loss</th><td>1.5000 (step 2)</td>"), std::string::npos);
  EXPECT_NE(html.find(">Gradient norm</text>"), std::string::npos);
  EXPECT_NE(html.find(">Step time</text>"), std::string::npos);
  EXPECT_NE(html.find(">largest rank</text>"), std::string::npos);
  // Hierarchical sharding's bytes: the shard group's beside the replicas'.
  EXPECT_NE(html.find(">Bytes sent per step (rank 0)</text>"), std::string::npos);
  EXPECT_NE(html.find(">in the shard group</text>"), std::string::npos);
  EXPECT_NE(html.find(">across replicas</text>"), std::string::npos);
  // And the time waited on them.
  EXPECT_NE(html.find(">Time waiting on collectives per step (rank 0)</text>"), std::string::npos);
}

// --sample-prompts' continuations travel with the checkpoint and are shown,
// escaped, in the report.
TEST(RunHistory, SamplesRoundTripAndAreShownEscaped) {
  RunHistory h = TwoSteps();
  h.AddSample(2, "Once <upon>", "a time & \"more\"\nand a line");
  const RunHistory back = RunHistory::FromValue(h.ToValue());
  testing::ScratchDir dir;
  const std::string path = dir.path() + "/report.html";
  ASSERT_TRUE(WriteReport(path, {"run", {}}, back, /*language_model=*/true).ok());
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string html = ss.str();
  EXPECT_NE(html.find("<h2>Samples</h2>"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>2</td><td style=\"white-space:pre-wrap\">Once &lt;upon&gt;</td>"), std::string::npos)
      << html;
  EXPECT_NE(html.find("a time &amp; &quot;more&quot;\nand a line"), std::string::npos) << html;
  // No samples: no section.
  ASSERT_TRUE(WriteReport(path, {"run", {}}, TwoSteps(), true).ok());
  std::ifstream in2(path);
  std::stringstream ss2;
  ss2 << in2.rdbuf();
  EXPECT_EQ(ss2.str().find("<h2>Samples</h2>"), std::string::npos);
}

}  // namespace
}  // namespace zt::train
