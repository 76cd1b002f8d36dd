// The HTML training report: written atomically, self-contained, with one
// chart per recorded curve.
#include "monitor/report.h"

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

TEST(ReportTest, UnwritablePathIsAnError) {
  ScratchDir dir;
  testing::WriteAll(dir.File("f"), "x");
  absl::Status st = WriteTrainingReport(dir.File("f") + "/report.html", ReportData{});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(dir.File("f") + "/report.html"), std::string::npos) << st;
}

}  // namespace
}  // namespace zt::monitor
