#include "benchmarks/report/doc_blocks.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace zt::bench {
namespace {

// Lines of the printed output that belong in the document: not the
// machine-readable rows, the context markers, the summary (shown apart) or
// the machine line (shown above the table).
bool ShowLine(absl::string_view line) {
  absl::string_view body = line;
  if (absl::StartsWith(body, "[rank ")) {
    const size_t close = body.find("] ");
    if (close != absl::string_view::npos) body = body.substr(close + 2);
  }
  return !absl::StartsWith(body, "RESULT ") && !absl::StartsWith(body, "### ") &&
         !absl::StartsWith(body, "SUMMARY: ") && !absl::StartsWith(body, "cpu: ");
}

}  // namespace

absl::StatusOr<std::string> ReplaceBlock(absl::string_view doc, absl::string_view name, absl::string_view content) {
  const std::string begin = absl::StrCat("<!-- bench:", name, ":begin -->");
  const std::string end = absl::StrCat("<!-- bench:", name, ":end -->");
  const size_t b = doc.find(begin);
  const size_t e = doc.find(end);
  if (b == absl::string_view::npos || e == absl::string_view::npos) {
    return absl::NotFoundError(absl::StrCat("the document has no '", b == absl::string_view::npos ? begin : end,
                                            "' line; add the pair ", begin, " / ", end, " where the results of '", name,
                                            "' belong"));
  }
  if (doc.find(begin, b + 1) != absl::string_view::npos || doc.find(end, e + 1) != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("the document has '", begin, "' or '", end, "' more than once; keep one pair"));
  }
  if (e < b) return absl::InvalidArgumentError(absl::StrCat("'", end, "' comes before '", begin, "'"));
  std::string out(doc.substr(0, b + begin.size()));
  absl::StrAppend(&out, "\n", content);
  if (!absl::EndsWith(content, "\n")) out += "\n";
  absl::StrAppend(&out, doc.substr(e));
  return out;
}

std::string RenderBlock(absl::string_view name, const BenchLog& log, const RunInfo& run, absl::string_view printed,
                        const std::vector<std::string>& chart_paths) {
  std::string out = absl::StrCat("*Written by `scripts/bench.sh ", name, "`");
  if (!run.date.empty()) absl::StrAppend(&out, " on ", run.date);
  if (!run.commit.empty()) absl::StrAppend(&out, " at commit ", run.commit);
  if (run.seconds > 0) absl::StrAppend(&out, ", ", static_cast<int64_t>(run.seconds + 0.5), " s");
  absl::StrAppend(&out, "; edits inside this block are overwritten.*\n\n");
  if (!run.command.empty()) absl::StrAppend(&out, "```\n", run.command, "\n```\n\n");
  if (!log.machine.empty()) absl::StrAppend(&out, "Machine: `", log.machine, "`\n\n");
  std::vector<absl::string_view> shown;
  for (absl::string_view line : absl::StrSplit(printed, '\n')) {
    line = absl::StripTrailingAsciiWhitespace(line);
    if (ShowLine(line)) shown.push_back(line);
  }
  while (!shown.empty() && shown.front().empty()) shown.erase(shown.begin());
  while (!shown.empty() && shown.back().empty()) shown.pop_back();
  if (!shown.empty()) absl::StrAppend(&out, "```text\n", absl::StrJoin(shown, "\n"), "\n```\n\n");
  absl::StrAppend(&out, "**Summary:** ", log.summary.empty() ? "(the benchmark printed none)" : log.summary, "\n");
  for (const std::string& path : chart_paths) {
    absl::StrAppend(&out, "\n![", name, "](", path, ")\n");
  }
  return out;
}

std::string RenderSuiteBlock(const std::vector<std::pair<std::string, std::pair<BenchLog, RunInfo>>>& entries) {
  double total = 0;
  std::string machine, date, commit;
  for (const auto& [name, result] : entries) {
    total += result.second.seconds;
    if (machine.empty()) machine = result.first.machine;
    if (date.empty()) date = result.second.date;
    if (commit.empty()) commit = result.second.commit;
  }
  std::string out = absl::StrCat("*Written by `scripts/bench.sh`");
  if (!date.empty()) absl::StrAppend(&out, " on ", date);
  if (!commit.empty()) absl::StrAppend(&out, " at commit ", commit);
  absl::StrAppend(&out, ": ", entries.size(), " benchmarks, ", static_cast<int64_t>(total + 0.5),
                  " s in all; edits inside this block are overwritten.*\n\n");
  if (!machine.empty()) absl::StrAppend(&out, "Machine: `", machine, "`\n\n");
  absl::StrAppend(&out, "| benchmark | seconds | summary |\n|---|---:|---|\n");
  for (const auto& [name, result] : entries) {
    std::string summary = result.first.summary.empty() ? "(none printed)" : result.first.summary;
    absl::StrReplaceAll({{"|", "\\|"}}, &summary);  // a table cell
    absl::StrAppend(&out, "| ", name, " | ", static_cast<int64_t>(result.second.seconds + 0.5), " | ", summary, " |\n");
  }
  return out;
}

}  // namespace zt::bench
