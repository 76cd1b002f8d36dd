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

// Some finite point (a curve read from an older checkpoint is all NaN).
bool HasPoints(const Series& s) {
  const size_t n = std::min(s.x.size(), s.y.size());
  for (size_t i = 0; i < n; ++i) {
    if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) return true;
  }
  return false;
}

std::string Chart(const std::vector<Series>& series, const std::string& title, const std::string& y_label,
                  bool y_from_zero = false) {
  ChartOptions o;
  o.title = title;
  o.x_label = "step";
  o.y_label = y_label;
  o.y_from_zero = y_from_zero;
  return absl::StrCat("<figure>\n", LineChartSvg(series, o), "</figure>\n");
}

Series Scaled(Series s, double by) {
  for (double& v : s.y) v /= by;
  return s;
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
    } else if (e.tag == tags::kGradNorm) {
      Append(&grad_norm, e);
    } else if (e.tag == tags::kStepTimeSec) {
      Append(&step_time, e);
    } else if (e.tag == tags::kLr) {
      Append(&lr, e);
    } else if (e.tag == tags::kCommShardBytes) {
      Append(&sent_shard, e);
    } else if (e.tag == tags::kCommAcrossBytes) {
      Append(&sent_across, e);
    } else if (e.tag == tags::kCommShardWaitSec) {
      Append(&wait_shard, e);
    } else if (e.tag == tags::kCommAcrossWaitSec) {
      Append(&wait_across, e);
    }
  }
}

std::vector<double> SmoothedLikeTensorBoard(const std::vector<double>& y, double weight) {
  std::vector<double> out;
  out.reserve(y.size());
  double last = 0;
  int64_t seen = 0;
  for (double v : y) {
    if (!std::isfinite(v)) {
      out.push_back(v);
      continue;
    }
    last = last * weight + (1 - weight) * v;
    ++seen;
    out.push_back(last / (1 - std::pow(weight, static_cast<double>(seen))));
  }
  return out;
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
  if (HasPoints(data.train_loss)) {
    const bool smooth = data.smoothing > 0 && data.smoothing < 1 && data.train_loss.y.size() > 2;
    Series raw = data.train_loss;
    raw.faint = smooth;
    loss.push_back(raw);
    if (smooth) {
      Series s{absl::StrCat("train, smoothed (", data.smoothing, ")"), data.train_loss.x,
               SmoothedLikeTensorBoard(data.train_loss.y, data.smoothing)};
      loss.push_back(std::move(s));
    }
  }
  if (HasPoints(data.eval_loss)) {
    Series eval = data.eval_loss;
    eval.markers = true;  // evaluations are sparse: each one a dot
    loss.push_back(std::move(eval));
  }
  if (!loss.empty()) absl::StrAppend(&charts, Chart(loss, "Loss", "loss"));
  if (HasPoints(data.throughput)) {
    absl::StrAppend(&charts, Chart({data.throughput}, "Throughput", absl::StrCat(data.items_name, "/s")));
  }
  if (HasPoints(data.memory_bytes) || HasPoints(data.memory_max)) {
    double peak = 0;
    for (const Series* s : {&data.memory_bytes, &data.memory_max}) {
      for (double v : s->y) {
        if (std::isfinite(v)) peak = std::max(peak, v);
      }
    }
    const bool gib = peak >= double(1 << 30);
    const double unit = gib ? double(1 << 30) : double(1 << 20);
    // Every rank's range when the run had several (their largest and
    // smallest), else the one rank's; from 0, so noise stays small.
    std::vector<Series> mem;
    if (HasPoints(data.memory_max) && HasPoints(data.memory_min)) {
      mem = {Scaled(data.memory_max, unit), Scaled(data.memory_min, unit)};
    } else {
      mem = {Scaled(data.memory_bytes, unit)};
    }
    absl::StrAppend(&charts, Chart(mem, "Resident memory", gib ? "GiB" : "MiB", /*y_from_zero=*/true));
  }
  if (HasPoints(data.grad_norm)) absl::StrAppend(&charts, Chart({data.grad_norm}, "Gradient norm", "norm"));
  if (HasPoints(data.step_time)) {
    absl::StrAppend(&charts, Chart({data.step_time}, "Step time", "seconds", /*y_from_zero=*/true));
  }
  if (HasPoints(data.lr)) absl::StrAppend(&charts, Chart({data.lr}, "Learning rate", "lr"));
  if (HasPoints(data.sent_shard) || HasPoints(data.sent_across)) {
    // Flat sharding: one curve (everything went to the world); hierarchical:
    // what stayed in the shard group beside what crossed to the replicas.
    std::vector<Series> sent;
    if (HasPoints(data.sent_shard)) {
      sent.push_back(Scaled(data.sent_shard, double(1 << 20)));
      if (!HasPoints(data.sent_across)) sent.back().name = "all collectives";
    }
    if (HasPoints(data.sent_across)) sent.push_back(Scaled(data.sent_across, double(1 << 20)));
    absl::StrAppend(&charts, Chart(sent, "Bytes sent per step (rank 0)", "MiB", /*y_from_zero=*/true));
  }
  if (HasPoints(data.wait_shard) || HasPoints(data.wait_across)) {
    // The time those bytes cost rank 0 beyond what compute hid.
    std::vector<Series> wait;
    if (HasPoints(data.wait_shard)) {
      wait.push_back(Scaled(data.wait_shard, 1e-3));
      if (!HasPoints(data.wait_across)) wait.back().name = "all collectives";
    }
    if (HasPoints(data.wait_across)) wait.push_back(Scaled(data.wait_across, 1e-3));
    absl::StrAppend(&charts, Chart(wait, "Time waiting on collectives per step (rank 0)", "ms", /*y_from_zero=*/true));
  }
  if (charts.empty()) {
    absl::StrAppend(&html, "<p>No metrics were recorded in this run.</p>\n");
  } else {
    absl::StrAppend(&html, "<div class=\"charts\">\n", charts, "</div>\n");
  }
  if (!data.samples.empty()) {
    absl::StrAppend(&html, "<h2>Samples</h2>\n<table>\n<tr><th>step</th><th>prompt</th><th>continuation</th></tr>\n");
    for (const ReportData::TextSample& s : data.samples) {
      absl::StrAppend(&html, "<tr><td>", s.step, "</td><td style=\"white-space:pre-wrap\">", XmlEscape(s.prompt),
                      "</td><td style=\"white-space:pre-wrap\">", XmlEscape(s.text), "</td></tr>\n");
    }
    absl::StrAppend(&html, "</table>\n");
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
