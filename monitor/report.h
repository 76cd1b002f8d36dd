// The end-of-run training report: one self-contained HTML file (inline CSS
// and SVG charts; no JavaScript, nothing fetched) with the run's settings and
// its curves -- loss (train and eval), throughput, memory and learning rate
// against step. Open it in any browser, attach it to an issue.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "monitor/monitor.h"
#include "monitor/svg_chart.h"

namespace zt::monitor {

struct ReportData {
  std::string title = "zerotorch training run";
  // Key/value rows in display order: model, parameters, world size, ZeRO stage, config summary...
  std::vector<std::pair<std::string, std::string>> summary;
  std::string items_name = "tokens";  // throughput unit: "tokens" or "samples" (per second)

  // x = step. Empty series are left out of the report.
  Series train_loss{"train", {}, {}};
  Series eval_loss{"eval", {}, {}};
  Series throughput{"throughput", {}, {}};
  Series memory_bytes{"memory", {}, {}};
  Series lr{"lr", {}, {}};

  // Appends events whose tags the report knows (tags::kTrainLoss, kEvalLoss,
  // kTokensPerSec / kSamplesPerSec, kMemoryBytes, kLr); others are ignored.
  void AddEvents(const std::vector<Event>& events);
};

// The HTML text of the report.
std::string TrainingReportHtml(const ReportData& data);
// Writes TrainingReportHtml(data) to `path` (e.g. "runs/gpt/report.html")
// atomically: a temporary file renamed into place.
absl::Status WriteTrainingReport(const std::string& path, const ReportData& data);

// A monitor that keeps the events the report needs, to add to the run's
// MonitorSet; data() at the end feeds WriteTrainingReport.
class ReportCollector : public Monitor {
 public:
  std::string name() const override { return "report"; }
  absl::Status Write(const std::vector<Event>& events) override {
    data_.AddEvents(events);
    return absl::OkStatus();
  }
  ReportData& data() { return data_; }
  const ReportData& data() const { return data_; }

 private:
  ReportData data_;
};

}  // namespace zt::monitor
