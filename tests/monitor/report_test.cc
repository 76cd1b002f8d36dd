// The HTML training report: written atomically, self-contained, with one
// chart per recorded curve.
#include "monitor/report.h"

#include <cmath>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "monitor_test_util.h"
#include "xml_check.h"

namespace zt::monitor {
namespace {

using testing::CheckXml;
using testing::ReadAll;
using testing::ScratchDir;

int Count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(ReportTest, WritesChartsFromCollectedEvents) {
  ReportCollector collector;
  for (int step = 1; step <= 50; ++step) {
    std::vector<Event> events = {{tags::kTrainLoss, 3.0 / step, step},
                                 {tags::kLr, 1e-3, step},
                                 {tags::kTokensPerSec, 10000.0 + step, step},
                                 {tags::kMemoryBytes, 2.5 * (1 << 30), step},
                                 {"Other/ignored", 1.0, step}};
    if (step % 10 == 0) events.push_back({tags::kEvalLoss, 3.5 / step, step});
    ASSERT_TRUE(collector.Write(events).ok());
  }
  ReportData& data = collector.data();
  EXPECT_EQ(data.train_loss.x.size(), 50u);
  EXPECT_EQ(data.eval_loss.y.size(), 5u);
  EXPECT_EQ(data.items_name, "tokens");
  data.title = "gpt2-small <run & 1>";
  data.summary = {{"model", "gpt2-small"}, {"parameters", "124M"}, {"world size", "8"}, {"ZeRO stage", "3"}};

  ScratchDir dir;
  const std::string path = dir.path() + "/runs/a/report.html";  // directories are created
  ASSERT_TRUE(WriteTrainingReport(path, data).ok());
  const std::string html = ReadAll(path);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(CheckXml(html, {"meta"}), "");
  EXPECT_EQ(Count(html, "<svg "), 4);  // loss, throughput, memory, lr
  EXPECT_EQ(Count(html, "</svg>"), 4);
  EXPECT_NE(html.find(">train</text>"), std::string::npos);
  EXPECT_NE(html.find(">eval</text>"), std::string::npos);
  EXPECT_NE(html.find("tokens/s"), std::string::npos);
  EXPECT_NE(html.find(">GiB</text>"), std::string::npos);
  EXPECT_NE(html.find("<th>ZeRO stage</th><td>3</td>"), std::string::npos);
  EXPECT_NE(html.find("gpt2-small &lt;run &amp; 1&gt;"), std::string::npos);
  // Self-contained: nothing to run, nothing to fetch.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));
  EXPECT_EQ(html.find("https://"), std::string::npos);
  // No temporary left behind.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path() + "/runs/a")) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST(ReportTest, EmptyRunAndSamplesThroughput) {
  ReportData data;
  std::string html = TrainingReportHtml(data);
  EXPECT_EQ(CheckXml(html, {"meta"}), "");
  EXPECT_EQ(Count(html, "<svg "), 0);
  EXPECT_NE(html.find("No metrics were recorded"), std::string::npos);

  data.AddEvents({{tags::kSamplesPerSec, 50, 1}, {tags::kSamplesPerSec, 55, 2}, {tags::kMemoryBytes, 300e6, 2}});
  EXPECT_EQ(data.items_name, "samples");
  html = TrainingReportHtml(data);
  EXPECT_EQ(Count(html, "<svg "), 2);
  EXPECT_NE(html.find("samples/s"), std::string::npos);
  EXPECT_NE(html.find(">MiB</text>"), std::string::npos);
}

// What a reader needs besides the raw curves: the train loss smoothed as
// TensorBoard's slider does (raw drawn faint under it), each evaluation a
// dot, every rank's memory range on an axis from 0, gradient norm and step
// time charted.
TEST(ReportTest, SmoothedLossMarkedEvalsRanksMemoryGradNormAndStepTime) {
  ReportData data;
  for (int step = 1; step <= 40; ++step) {
    const double noise = (step % 2 == 0 ? 0.2 : -0.2);
    data.AddEvents({{tags::kTrainLoss, 4.0 - 0.05 * step + noise, step},
                    {tags::kGradNorm, 1.0 + 0.01 * step, step},
                    {tags::kStepTimeSec, 0.5, step}});
    data.memory_min.x.push_back(step);
    data.memory_min.y.push_back(1.90 * (1 << 30));
    data.memory_max.x.push_back(step);
    data.memory_max.y.push_back(2.00 * (1 << 30) + step * 1e5);
    if (step % 20 == 0) data.AddEvents({{tags::kEvalLoss, 3.0, step}});
  }
  EXPECT_EQ(data.grad_norm.y.size(), 40u);
  EXPECT_EQ(data.step_time.y.size(), 40u);
  const std::string html = TrainingReportHtml(data);
  EXPECT_EQ(CheckXml(html, {"meta"}), "");
  EXPECT_EQ(Count(html, "<svg "), 4);  // loss, memory, gradient norm, step time
  EXPECT_NE(html.find(">train, smoothed (0.6)</text>"), std::string::npos);
  EXPECT_NE(html.find("stroke-opacity=\"0.35\""), std::string::npos);  // the raw curve, faint
  EXPECT_NE(html.find(">Gradient norm</text>"), std::string::npos);
  EXPECT_NE(html.find(">Step time</text>"), std::string::npos);
  EXPECT_NE(html.find(">largest rank</text>"), std::string::npos);
  EXPECT_NE(html.find(">smallest rank</text>"), std::string::npos);
  // The loss chart: two evaluations, each a dot.
  const size_t loss_end = html.find("</svg>");
  EXPECT_EQ(Count(html.substr(0, loss_end), "<circle "), 2);
  // The memory chart's axis starts at 0: 1.9-2.0 GiB is not drawn as a swing.
  const size_t mem = html.find(">Resident memory</text>");
  ASSERT_NE(mem, std::string::npos);
  const std::string mem_svg = html.substr(mem, html.find("</svg>", mem) - mem);
  EXPECT_NE(mem_svg.find(">0</text>"), std::string::npos) << mem_svg;
}

TEST(ReportTest, SmoothingIsTensorBoardsDebiasedMovingAverage) {
  const std::vector<double> s = SmoothedLikeTensorBoard({1.0, 3.0, std::nan(""), 3.0}, 0.5);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_DOUBLE_EQ(s[0], 1.0);  // the first point is itself
  EXPECT_DOUBLE_EQ(s[1], (0.5 * 0.5 + 0.5 * 3.0) / 0.75);
  EXPECT_TRUE(std::isnan(s[2]));  // skipped, not averaged in
  EXPECT_DOUBLE_EQ(s[3], ((0.5 * 0.5 + 0.5 * 3.0) * 0.5 + 0.5 * 3.0) / 0.875);
}

TEST(ReportTest, UnwritablePathIsAnError) {
  ScratchDir dir;
  testing::WriteAll(dir.File("f"), "x");
  absl::Status st = WriteTrainingReport(dir.File("f") + "/report.html", ReportData{});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(dir.File("f") + "/report.html"), std::string::npos) << st;
}

}  // namespace
}  // namespace zt::monitor
