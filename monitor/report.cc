// Training report: HTML skeleton, summary table, one SVG chart per curve.
#include "monitor/report.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "monitor/file_util.h"
#include "util/file_io.h"

namespace zt::monitor {
namespace {

void Append(Series* s, const Event& e) {
  s->x.push_back(static_cast<double>(e.step));
  s->y.push_back(e.value);
}

bool HasPoints(const Series& s) { return !s.x.empty() && !s.y.empty(); }

std::string Chart(const std::vector<Series>& series, const std::string& title, const std::string& y_label) {
  ChartOptions o;
  o.title = title;
  o.x_label = "step";
  o.y_label = y_label;
  return absl::StrCat("<figure>\n", LineChartSvg(series, o), "</figure>\n");
}

std::string NowUtc() {
  time_t t = ::time(nullptr);
  struct tm tm;
  ::gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

}  // namespace

void ReportData::AddEvents(const std::vector<Event>& events) {
  for (const Event& e : events) {
    if (e.tag == tags::kTrainLoss) {
      Append(&train_loss, e);
    } else if (e.tag == tags::kEvalLoss) {
      Append(&eval_loss, e);
    } else if (e.tag == tags::kTokensPerSec) {
      items_name = "tokens";
      Append(&throughput, e);
    } else if (e.tag == tags::kSamplesPerSec) {
      if (throughput.x.empty()) items_name = "samples";
      if (items_name == "samples") Append(&throughput, e);  // tokens/s wins when both are reported
    } else if (e.tag == tags::kMemoryBytes) {
      Append(&memory_bytes, e);
    } else if (e.tag == tags::kLr) {
      Append(&lr, e);
    }
  }
}

std::string TrainingReportHtml(const ReportData& data) {
  std::string html = absl::StrCat("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>",
                                  XmlEscape(data.title),
                                  "</title>\n<style>\n"
                                  "body{font-family:sans-serif;margin:2em auto;max-width:1340px;color:#222}\n"
                                  "table{border-collapse:collapse;margin-bottom:1.5em}\n"
                                  "td,th{border:1px solid #ddd;padding:4px 10px;text-align:left;vertical-align:top}\n"
                                  "th{background:#f5f5f5}\n"
                                  ".charts{display:flex;flex-wrap:wrap;gap:16px}\nfigure{margin:0}\n"
                                  "footer{margin-top:2em;color:#888;font-size:small}\n"
                                  "</style>\n</head>\n<body>\n<h1>",
                                  XmlEscape(data.title), "</h1>\n");
  if (!data.summary.empty()) {
    absl::StrAppend(&html, "<table>\n");
    for (const auto& [key, value] : data.summary) {
      absl::StrAppend(&html, "<tr><th>", XmlEscape(key), "</th><td>", XmlEscape(value), "</td></tr>\n");
    }
    absl::StrAppend(&html, "</table>\n");
  }

  std::string charts;
  std::vector<Series> loss;
  if (HasPoints(data.train_loss)) loss.push_back(data.train_loss);
  if (HasPoints(data.eval_loss)) loss.push_back(data.eval_loss);
  if (!loss.empty()) absl::StrAppend(&charts, Chart(loss, "Loss", "loss"));
  if (HasPoints(data.throughput)) {
    absl::StrAppend(&charts, Chart({data.throughput}, "Throughput", absl::StrCat(data.items_name, "/s")));
  }
  if (HasPoints(data.memory_bytes)) {
    double peak = 0;
    for (double v : data.memory_bytes.y) {
      if (std::isfinite(v)) peak = std::max(peak, v);
    }
    const bool gib = peak >= double(1 << 30);
    Series mem = data.memory_bytes;
    for (double& v : mem.y) v /= gib ? double(1 << 30) : double(1 << 20);
    absl::StrAppend(&charts, Chart({mem}, "Memory", gib ? "GiB" : "MiB"));
  }
  if (HasPoints(data.lr)) absl::StrAppend(&charts, Chart({data.lr}, "Learning rate", "lr"));
  if (charts.empty()) {
    absl::StrAppend(&html, "<p>No metrics were recorded in this run.</p>\n");
  } else {
    absl::StrAppend(&html, "<div class=\"charts\">\n", charts, "</div>\n");
  }
  absl::StrAppend(&html, "<footer>Written by zerotorch at ", NowUtc(), ".</footer>\n</body>\n</html>\n");
  return html;
}

absl::Status WriteTrainingReport(const std::string& path, const ReportData& data) {
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    absl::Status st = MakeDirs(path.substr(0, slash), "the report path");
    if (!st.ok()) return absl::Status(st.code(), absl::StrCat("training report ", path, ": ", st.message()));
  }
  absl::Status st = zt::WriteFileAtomically(path, TrainingReportHtml(data));
  if (!st.ok()) return absl::Status(st.code(), absl::StrCat("training report ", path, ": ", st.message()));
  return absl::OkStatus();
}

}  // namespace zt::monitor
