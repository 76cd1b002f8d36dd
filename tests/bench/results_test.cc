#include "benchmarks/results.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "tests/testing/scratch_dir.h"
#include "util/file_io.h"
#include "util/system_info.h"

namespace zt::bench {
namespace {

TEST(ResultRow, PrintsKeyValuePairsInOrderAndKeepsTheLineOneLine) {
  ResultRow r;
  r.Set("run", "3-no-prefetch").Set("world", 2).Set("step_ms", 812.53125).Set("note", "two words");
  EXPECT_EQ(r.Line(), "RESULT run=3-no-prefetch world=2 step_ms=812.531 note=two_words");
  r.Set("world", 4);  // a key set twice keeps its place
  EXPECT_EQ(r.Get("world"), "4");
  EXPECT_EQ(r.fields().size(), 4u);
  double v = 0;
  EXPECT_TRUE(r.GetNumber("step_ms", &v));
  EXPECT_DOUBLE_EQ(v, 812.531);
  EXPECT_FALSE(r.GetNumber("run", &v));
  EXPECT_FALSE(r.GetNumber("missing", &v));
  EXPECT_EQ(r.Get("missing"), "");
}

TEST(ParseBenchLog, ReadsMachineContextRowsAndTheLastSummary) {
  const std::string text = "noise before\n" + SystemInfoLine() +
                           "\n"
                           "### world=2 round=1 impl=zt\n"
                           "[rank 0] RESULT stage=0 step_ms=10.5\n"
                           "a table line\n"
                           "SUMMARY: first\n"
                           "### world=4 round=1 impl=ddp\n"
                           "RESULT step_ms=7 world=8\n"
                           "[rank 0] SUMMARY: stage 3 is 1.2x stage 0\n";
  absl::StatusOr<BenchLog> log = ParseBenchLog(text, "x.log");
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ(log->machine, SystemInfoLine());
  ASSERT_EQ(log->rows.size(), 2u);
  EXPECT_EQ(log->rows[0].Line(), "RESULT world=2 round=1 impl=zt stage=0 step_ms=10.5");
  // The row's own value wins over the context's.
  EXPECT_EQ(log->rows[1].Get("world"), "8");
  EXPECT_EQ(log->rows[1].Get("impl"), "ddp");
  EXPECT_EQ(log->summary, "stage 3 is 1.2x stage 0");
}

TEST(ParseBenchLog, AMalformedFieldNamesTheSourceAndLine) {
  absl::StatusOr<BenchLog> log = ParseBenchLog("ok\nRESULT a=1 oops\n", "bench/x.txt");
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find("bench/x.txt:2"), std::string::npos) << log.status();
  EXPECT_NE(log.status().message().find("'oops'"), std::string::npos) << log.status();
  EXPECT_FALSE(ParseBenchLog("RESULT Bad=1\n", "y").ok());
  EXPECT_FALSE(ParseBenchLog("RESULT \n", "y").ok());
  EXPECT_FALSE(ParseBenchLog("### =1\n", "y").ok());
}

TEST(BenchJson, RoundTripsRowsNumbersStringsAndRunInfo) {
  BenchLog log;
  log.machine = "cpu: test | cores: 2";
  log.summary = "all good";
  ResultRow r;
  r.Set("stage", "3-reuse").Set("step_ms", 12.25).Set("world", 3).Set("loss", "nan");
  log.rows.push_back(r);
  const RunInfo run{"scripts/bench.sh zero_stages", "2026-11-23 19:00 UTC", "abc1234", 301.5};
  const std::string json = BenchLogJson("zero_stages", log, run);
  EXPECT_NE(json.find("\"step_ms\": 12.25"), std::string::npos) << json;
  EXPECT_NE(json.find("\"loss\": \"nan\""), std::string::npos) << json;  // not a finite number: a string
  absl::StatusOr<std::pair<BenchLog, RunInfo>> back = ReadBenchJson(json, "x.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->first.machine, log.machine);
  EXPECT_EQ(back->first.summary, log.summary);
  ASSERT_EQ(back->first.rows.size(), 1u);
  EXPECT_EQ(back->first.rows[0].Line(), "RESULT stage=3-reuse step_ms=12.25 world=3 loss=nan");
  EXPECT_EQ(back->second.command, run.command);
  EXPECT_EQ(back->second.commit, run.commit);
  EXPECT_DOUBLE_EQ(back->second.seconds, 301.5);
}

TEST(BenchJson, MalformedJsonIsAnErrorNamingTheFile) {
  for (const char* bad : {"{", "[]", "{\"rows\": 3}", "{\"rows\": [1]}", "{\"rows\": [{\"a\": [1]}]}"}) {
    absl::StatusOr<std::pair<BenchLog, RunInfo>> r = ReadBenchJson(bad, "build/bench/x.json");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("build/bench/x.json"), std::string::npos) << r.status();
  }
}

TEST(WriteFileAtomically, WritesWholeFilesAndLeavesNoTemporaryBehind) {
  testing::ScratchDir dir("zt_bench");
  ASSERT_TRUE(zt::WriteFileAtomically(dir.File("a.txt"), "first").ok());
  ASSERT_TRUE(zt::WriteFileAtomically(dir.File("a.txt"), "second").ok());
  EXPECT_EQ(testing::ReadFileBytes(dir.File("a.txt")), "second");
  EXPECT_EQ(dir.List(), std::vector<std::string>{"a.txt"});
  const absl::Status st = zt::WriteFileAtomically(dir.File("no/such/folder/a.txt"), "x");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no/such/folder/a.txt"), std::string::npos) << st;
}

TEST(ResultLog, PrintsRowsThenTheSummaryAndWritesTheSameJson) {
  testing::ScratchDir dir("zt_bench");
  std::ostringstream out;
  ResultLog log("nvme", dir.File("nvme.json"), out);
  log.Machine("cpu: test");
  log.Add(ResultRow().Set("engine", "uring").Set("write_gbps", 2.5));
  ASSERT_TRUE(log.Finish("write 1.5x raw").ok());
  EXPECT_EQ(out.str(), "RESULT engine=uring write_gbps=2.5\nSUMMARY: write 1.5x raw\n");
  absl::StatusOr<std::pair<BenchLog, RunInfo>> back =
      ReadBenchJson(testing::ReadFileBytes(dir.File("nvme.json")), "nvme.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->first.machine, "cpu: test");
  EXPECT_EQ(back->first.summary, "write 1.5x raw");
  ASSERT_EQ(back->first.rows.size(), 1u);
  EXPECT_EQ(back->first.rows[0].Get("engine"), "uring");
  // The printed text parses to the same rows.
  absl::StatusOr<BenchLog> parsed = ParseBenchLog(out.str(), "stdout");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->rows[0].Line(), back->first.rows[0].Line());
}

}  // namespace
}  // namespace zt::bench
