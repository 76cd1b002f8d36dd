#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "benchmarks/report/charts.h"
#include "benchmarks/report/doc_blocks.h"
#include "benchmarks/results.h"
#include "tests/testing/scratch_dir.h"

namespace zt::bench {
namespace {

const char kDoc[] =
    "# Benchmarks\n\nProse about nvme.\n\n<!-- bench:nvme:begin -->\nold numbers\n<!-- bench:nvme:end -->\n\n"
    "More prose.\n";

TEST(ReplaceBlock, RewritesOnlyTheInsideOfTheNamedBlock) {
  absl::StatusOr<std::string> out = ReplaceBlock(kDoc, "nvme", "new numbers\n");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out,
            "# Benchmarks\n\nProse about nvme.\n\n<!-- bench:nvme:begin -->\nnew numbers\n<!-- bench:nvme:end -->\n\n"
            "More prose.\n");
  // Idempotent: rendering the same content twice gives the same document.
  absl::StatusOr<std::string> again = ReplaceBlock(*out, "nvme", "new numbers");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *out);
}

TEST(ReplaceBlock, MissingRepeatedOrReversedMarkersAreErrorsNamingTheMarker) {
  absl::StatusOr<std::string> missing = ReplaceBlock(kDoc, "offload", "x");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("<!-- bench:offload:begin -->"), std::string::npos) << missing.status();
  const std::string twice = absl::StrCat(kDoc, "<!-- bench:nvme:begin -->\n");
  EXPECT_FALSE(ReplaceBlock(twice, "nvme", "x").ok());
  EXPECT_FALSE(ReplaceBlock("<!-- bench:a:end -->\n<!-- bench:a:begin -->\n", "a", "x").ok());
}

TEST(RenderBlock, ShowsCommandMachineTablesSummaryAndChartsButNotTheRawRows) {
  BenchLog log;
  log.machine = "cpu: test | cores: 2";
  log.summary = "stage 3 uses 0.27x the memory of stage 0";
  const RunInfo run{"benchmarks/run_zero_stages.sh", "2026-11-23 19:00 UTC", "abc1234", 61.4};
  const std::string printed =
      "cpu: test | cores: 2\n\nrun   step ms\n0        10.0\nRESULT stage=0 step_ms=10\n### world=2\n"
      "SUMMARY: stage 3 uses 0.27x the memory of stage 0\n\n";
  const std::string block = RenderBlock("zero_stages", log, run, printed, {"bench/zero_stages-memory.svg"});
  EXPECT_NE(block.find("scripts/bench.sh zero_stages"), std::string::npos) << block;
  EXPECT_NE(block.find("2026-11-23 19:00 UTC"), std::string::npos);
  EXPECT_NE(block.find("abc1234"), std::string::npos);
  EXPECT_NE(block.find(", 61 s"), std::string::npos);
  EXPECT_NE(block.find("```\nbenchmarks/run_zero_stages.sh\n```"), std::string::npos) << block;
  EXPECT_NE(block.find("Machine: `cpu: test | cores: 2`"), std::string::npos);
  EXPECT_NE(block.find("```text\nrun   step ms\n0        10.0\n```"), std::string::npos) << block;
  EXPECT_EQ(block.find("RESULT"), std::string::npos) << block;
  EXPECT_EQ(block.find("### world"), std::string::npos) << block;
  EXPECT_NE(block.find("**Summary:** stage 3 uses 0.27x"), std::string::npos);
  EXPECT_NE(block.find("![zero_stages](bench/zero_stages-memory.svg)"), std::string::npos);
}

TEST(RenderSuiteBlock, OneRowPerBenchmarkWithItsSummaryAndTheTotalTime) {
  BenchLog a, b;
  a.machine = "cpu: test";
  a.summary = "x | y";  // a pipe would split the table cell
  const RunInfo ra{"cmd a", "2026-11-23 19:00 UTC", "abc", 10.4};
  const RunInfo rb{"cmd b", "2026-11-23 19:01 UTC", "abc", 20.2};
  const std::string block = RenderSuiteBlock({{"nvme", {a, ra}}, {"offload", {b, rb}}});
  EXPECT_NE(block.find("2 benchmarks, 31 s in all"), std::string::npos) << block;
  EXPECT_NE(block.find("Machine: `cpu: test`"), std::string::npos) << block;
  EXPECT_NE(block.find("| nvme | 10 | x \\| y |"), std::string::npos) << block;
  EXPECT_NE(block.find("| offload | 20 | (none printed) |"), std::string::npos) << block;
}

BenchLog ZeroStagesLog() {
  BenchLog log;
  for (int world : {1, 2}) {
    for (int round : {1, 2, 3}) {
      for (int stage = 0; stage <= 3; ++stage) {
        ResultRow r;
        // Step time: stage 0 is 100 ms at every world; stage k is 100 + 10k;
        // round 2 is an outlier the median must ignore.
        const double step = (round == 2 ? 1000.0 : 100.0 + 10.0 * stage) / world;
        const double formula = 16.0 / (stage == 3 ? world : 1);
        r.Set("impl", "zt").Set("world", world).Set("round", round).Set("stage", absl::StrCat(stage));
        r.Set("step_ms", step).Set("model_state_mib", formula).Set("formula_mib", formula);
        r.Set("peak_mib", formula + 1.0);
        log.rows.push_back(r);
      }
      log.rows.push_back(ResultRow().Set("impl", "ddp").Set("world", world).Set("step_ms", 5.0));
    }
  }
  return log;
}

TEST(MedianOf, TakesTheMedianOfTheMatchingRowsOnly) {
  const BenchLog log = ZeroStagesLog();
  EXPECT_DOUBLE_EQ(MedianOf(log.rows, {{"impl", "zt"}, {"stage", "2"}, {"world", "1"}}, "step_ms"), 120.0);
  EXPECT_DOUBLE_EQ(MedianOf(log.rows, {{"impl", "ddp"}}, "step_ms"), 5.0);
  EXPECT_TRUE(std::isnan(MedianOf(log.rows, {{"impl", "none"}}, "step_ms")));
  EXPECT_TRUE(std::isnan(MedianOf(log.rows, {{"impl", "zt"}}, "no_such_key")));
}

TEST(ChartsFor, ZeroStagesDrawsMemoryStepAndScalingChartsFromTheRows) {
  const std::vector<Chart> charts = ChartsFor("zero_stages", ZeroStagesLog());
  ASSERT_EQ(charts.size(), 4u);
  EXPECT_EQ(charts[0].file, "zero_stages-memory.svg");
  EXPECT_NE(charts[0].svg.find("Memory per rank by ZeRO stage, world 2"), std::string::npos);
  EXPECT_NE(charts[0].svg.find("ZeRO formula"), std::string::npos);
  EXPECT_EQ(charts[1].file, "zero_stages-step.svg");
  EXPECT_NE(charts[1].svg.find("world 1"), std::string::npos);
  EXPECT_EQ(charts[2].file, "zero_stages-scaling-time.svg");
  EXPECT_EQ(charts[3].file, "zero_stages-scaling-memory.svg");
  for (const Chart& c : charts) {
    EXPECT_EQ(c.svg.rfind("<svg", 0), 0u) << c.file;
    EXPECT_EQ(c.svg.find("nan"), std::string::npos) << c.file;
  }
  // One world: no scaling charts. Another benchmark, or no rows: none.
  BenchLog one;
  for (const ResultRow& r : ZeroStagesLog().rows) {
    if (r.Get("world") == "1") one.rows.push_back(r);
  }
  EXPECT_EQ(ChartsFor("zero_stages", one).size(), 2u);
  EXPECT_TRUE(ChartsFor("nvme", ZeroStagesLog()).empty());
  EXPECT_TRUE(ChartsFor("zero_stages", BenchLog{}).empty());
}

int Shell(const std::string& command) {
  const int rc = std::system(command.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(ZtBenchReport, CollectsLogsAndRendersTheDocumentAndCharts) {
  testing::ScratchDir dir("zt_bench_report");
  const std::string tool = absl::StrCat(ZT_BINARY_DIR, "/bin/zt_bench_report");
  std::string log_text = "cpu: test | cores: 2\n";
  for (const ResultRow& r : ZeroStagesLog().rows) log_text += r.Line() + "\n";
  testing::WriteFileBytes(dir.File("zero_stages.log"), log_text);
  testing::WriteFileBytes(dir.File("zero_stages.txt"), "the table\nSUMMARY: fine\n");
  ASSERT_EQ(Shell(absl::StrCat(tool, " collect zero_stages --out ", dir.File("zero_stages.json"),
                               " --command 'run it' --seconds 12 ", dir.File("zero_stages.log"), " ",
                               dir.File("zero_stages.txt"))),
            0);
  const std::string json = testing::ReadFileBytes(dir.File("zero_stages.json"));
  EXPECT_NE(json.find("\"summary\": \"fine\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"command\": \"run it\""), std::string::npos) << json;

  ::mkdir(dir.File("docs").c_str(), 0755);
  testing::WriteFileBytes(dir.File("docs/b.md"),
                          "intro\n<!-- bench:zero_stages:begin -->\n<!-- bench:zero_stages:end -->\n");
  ASSERT_EQ(
      Shell(absl::StrCat(tool, " render --doc ", dir.File("docs/b.md"), " --results ", dir.path(), " zero_stages")), 0);
  const std::string doc = testing::ReadFileBytes(dir.File("docs/b.md"));
  EXPECT_NE(doc.find("the table"), std::string::npos) << doc;
  EXPECT_NE(doc.find("**Summary:** fine"), std::string::npos) << doc;
  EXPECT_NE(doc.find("(bench/zero_stages-memory.svg)"), std::string::npos) << doc;
  EXPECT_EQ(testing::ReadFileBytes(dir.File("docs/bench/zero_stages-memory.svg")).rfind("<svg", 0), 0u);

  // A missing block: an error, and the document is left as it was.
  testing::WriteFileBytes(dir.File("docs/c.md"), "no blocks\n");
  EXPECT_NE(Shell(absl::StrCat(tool, " render --doc ", dir.File("docs/c.md"), " --results ", dir.path(),
                               " zero_stages 2>", dir.File("err.txt"))),
            0);
  EXPECT_NE(testing::ReadFileBytes(dir.File("err.txt")).find("<!-- bench:zero_stages:begin -->"), std::string::npos);
  EXPECT_EQ(testing::ReadFileBytes(dir.File("docs/c.md")), "no blocks\n");
  // A log without rows: collect refuses rather than write an empty result.
  testing::WriteFileBytes(dir.File("empty.log"), "cpu: test\nSegmentation fault\n");
  EXPECT_NE(
      Shell(absl::StrCat(tool, " collect x --out ", dir.File("x.json"), " ", dir.File("empty.log"), " 2>/dev/null")),
      0);
  EXPECT_FALSE(std::filesystem::exists(dir.File("x.json")));
}

TEST(BenchScript, ListsItsBenchmarksAndRefusesUnknownNamesBeforeBuildingAnything) {
  testing::ScratchDir dir("zt_bench_script");
  const std::string script = absl::StrCat(ZT_SOURCE_DIR, "/scripts/bench.sh");
  ASSERT_EQ(Shell(absl::StrCat(script, " --list >", dir.File("list.txt"))), 0);
  const std::string list = testing::ReadFileBytes(dir.File("list.txt"));
  for (const char* name :
       {"collectives", "optimizer", "zero_stages", "activation_checkpoint", "checkpoint", "nvme", "offload"}) {
    EXPECT_NE(list.find(absl::StrCat(name, "\n")), std::string::npos) << name << " missing from:\n" << list;
  }
  EXPECT_EQ(Shell(absl::StrCat(script, " zero_stages no_such_bench 2>", dir.File("err.txt"))), 2);
  EXPECT_NE(testing::ReadFileBytes(dir.File("err.txt")).find("unknown benchmark 'no_such_bench'"), std::string::npos);
}

}  // namespace
}  // namespace zt::bench
