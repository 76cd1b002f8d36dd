// zt_bench_report: the suite's bookkeeping (scripts/bench.sh calls it).
//
//   zt_bench_report collect NAME --out NAME.json [--command C --date D --commit X --seconds S] LOG...
//       the RESULT/SUMMARY lines of the logs -> one JSON file
//   zt_bench_report render --doc docs/benchmarks.md --results DIR [--charts bench] [--suite] NAME...
//       DIR/NAME.json + DIR/NAME.txt (what the benchmark printed) -> the
//       NAME block of the document, and NAME's SVG charts in the folder
//       --charts (relative to the document); --suite also rewrites the
//       "suite" block, a table of every named benchmark's summary
//
// LibTorch-free. Nothing is half-written: every file goes through a rename.

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "benchmarks/report/charts.h"
#include "benchmarks/report/doc_blocks.h"
#include "benchmarks/results.h"
#include "cli/flags.h"
#include "util/file_io.h"
#include "util/status.h"

namespace zt::bench {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, const std::string& what_to_do) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path, "; ", what_to_do));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Folder(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

absl::Status Collect(const std::vector<std::string>& args) {
  cli::Flags f("zt_bench_report collect");
  f.String("out", "", "the JSON file to write");
  f.String("command", "", "the command that produced the logs");
  f.String("date", "", "when it ran (UTC)");
  f.String("commit", "", "the commit it ran at");
  f.Double("seconds", 0, "how long it ran");
  if (absl::Status st = f.Parse(args); !st.ok()) return st;
  if (f.help_requested()) {
    std::cout << f.Usage("NAME --out FILE.json [flags] LOG...");
    return absl::OkStatus();
  }
  const std::vector<std::string>& pos = f.positional();
  if (pos.size() < 2 || f.GetString("out").empty()) {
    return absl::InvalidArgumentError("zt_bench_report collect: give NAME, --out FILE.json and at least one LOG");
  }
  BenchLog all;
  for (size_t i = 1; i < pos.size(); ++i) {
    absl::StatusOr<std::string> text = ReadFile(pos[i], "did the benchmark run?");
    if (!text.ok()) return text.status();
    absl::StatusOr<BenchLog> log = ParseBenchLog(*text, pos[i]);
    if (!log.ok()) return log.status();
    if (all.machine.empty()) all.machine = log->machine;
    if (!log->summary.empty()) all.summary = log->summary;
    for (ResultRow& r : log->rows) all.rows.push_back(std::move(r));
  }
  if (all.rows.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("zt_bench_report collect: ", pos[0],
                                                      ": the logs hold no RESULT line; the benchmark failed or "
                                                      "printed nothing measurable (see its output)"));
  }
  RunInfo run{f.GetString("command"), f.GetString("date"), f.GetString("commit"), f.GetDouble("seconds")};
  return WriteFileAtomically(f.GetString("out"), BenchLogJson(pos[0], all, run));
}

absl::Status Render(const std::vector<std::string>& args) {
  cli::Flags f("zt_bench_report render");
  f.String("doc", "docs/benchmarks.md", "the document whose blocks to rewrite");
  f.String("results", "build/bench", "the folder with NAME.json and NAME.txt");
  f.String("charts", "bench", "the folder for SVG charts, relative to the document's folder");
  f.Bool("suite", "also rewrite the 'suite' block: a table of the named benchmarks' summaries");
  if (absl::Status st = f.Parse(args); !st.ok()) return st;
  if (f.help_requested()) {
    std::cout << f.Usage("[flags] NAME...");
    return absl::OkStatus();
  }
  if (f.positional().empty()) return absl::InvalidArgumentError("zt_bench_report render: name the benchmarks");
  const std::string doc_path = f.GetString("doc");
  absl::StatusOr<std::string> doc = ReadFile(doc_path, "give --doc the benchmarks document");
  if (!doc.ok()) return doc.status();
  const std::string chart_dir = absl::StrCat(Folder(doc_path), "/", f.GetString("charts"));
  std::string text = *doc;
  // All blocks first, in memory; files only once every block rendered.
  std::vector<Chart> to_write;
  std::vector<std::pair<std::string, std::pair<BenchLog, RunInfo>>> entries;
  for (const std::string& name : f.positional()) {
    const std::string base = absl::StrCat(f.GetString("results"), "/", name);
    absl::StatusOr<std::string> json = ReadFile(base + ".json", "run scripts/bench.sh " + name + " first");
    if (!json.ok()) return json.status();
    absl::StatusOr<std::pair<BenchLog, RunInfo>> parsed = ReadBenchJson(*json, base + ".json");
    if (!parsed.ok()) return parsed.status();
    absl::StatusOr<std::string> printed = ReadFile(base + ".txt", "run scripts/bench.sh " + name + " first");
    if (!printed.ok()) return printed.status();
    std::vector<std::string> paths;
    for (Chart& c : ChartsFor(name, parsed->first)) {
      paths.push_back(absl::StrCat(f.GetString("charts"), "/", c.file));
      to_write.push_back(std::move(c));
    }
    absl::StatusOr<std::string> next =
        ReplaceBlock(text, name, RenderBlock(name, parsed->first, parsed->second, *printed, paths));
    if (!next.ok()) return absl::Status(next.status().code(), absl::StrCat(doc_path, ": ", next.status().message()));
    text = std::move(*next);
    entries.emplace_back(name, std::move(*parsed));
  }
  if (f.GetBool("suite")) {
    absl::StatusOr<std::string> next = ReplaceBlock(text, "suite", RenderSuiteBlock(entries));
    if (!next.ok()) return absl::Status(next.status().code(), absl::StrCat(doc_path, ": ", next.status().message()));
    text = std::move(*next);
  }
  if (!to_write.empty()) ZT_RETURN_IF_ERROR(zt::MakeDirs(chart_dir));
  for (const Chart& c : to_write) {
    if (absl::Status st = WriteFileAtomically(absl::StrCat(chart_dir, "/", c.file), c.svg); !st.ok()) return st;
  }
  return WriteFileAtomically(doc_path, text);
}

}  // namespace
}  // namespace zt::bench

int main(int argc, char** argv) {
  const std::string usage =
      "usage: zt_bench_report collect NAME --out FILE.json [--command C --date D --commit X --seconds S] LOG...\n"
      "       zt_bench_report render [--doc docs/benchmarks.md --results build/bench --charts bench] [--suite] "
      "NAME...\n";
  if (argc < 2) {
    std::cerr << usage;
    return 2;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  absl::Status st;
  if (command == "collect") {
    st = zt::bench::Collect(args);
  } else if (command == "render") {
    st = zt::bench::Render(args);
  } else {
    std::cerr << "zt_bench_report: unknown command '" << command << "'\n" << usage;
    return 2;
  }
  if (!st.ok()) {
    std::cerr << (absl::StartsWith(st.message(), "zt_bench_report") ? "" : "zt_bench_report: ") << st.message() << "\n";
    return st.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}
