// The end-of-run training report: one self-contained HTML file (inline CSS
// and SVG charts; no JavaScript, nothing fetched) with the run's settings and
// its curves against step -- train loss (raw, and smoothed as TensorBoard's
// slider at 0.6 does) with the evaluations marked, throughput, memory (every
// rank's range, on an axis from 0), gradient norm, step time, learning rate
// and the bytes rank 0 sent per step (inside its shard group, across
// replicas). Open it in any browser, attach it to an issue.
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
  Series memory_bytes{"memory", {}, {}};  // rank 0's, or the only rank's
  Series memory_min{"smallest rank", {}, {}};
  Series memory_max{"largest rank", {}, {}};
  Series grad_norm{"gradient norm", {}, {}};
  Series step_time{"step time", {}, {}};  // seconds
  Series lr{"lr", {}, {}};
  // Bytes rank 0 sent per step: inside its shard group (the world under flat
  // sharding) and across replicas (hierarchical sharding).
  Series sent_shard{"in the shard group", {}, {}};
  Series sent_across{"across replicas", {}, {}};
  // Seconds rank 0 blocked on those groups' collectives per step.
  Series wait_shard{"in the shard group", {}, {}};
  Series wait_across{"across replicas", {}, {}};
  // Text a language model generated from fixed prompts at each evaluation
  // (zt train --sample-prompts), shown as a table under the charts.
  struct TextSample {
    int64_t step = 0;
    std::string prompt, text;
  };
  std::vector<TextSample> samples;
  // TensorBoard's smoothing weight for the train loss (0: no smoothed curve).
  double smoothing = 0.6;

  // Appends events whose tags the report knows (tags::kTrainLoss, kEvalLoss,
  // kTokensPerSec / kSamplesPerSec, kMemoryBytes, kGradNorm, kStepTimeSec,
  // kLr, kCommShardBytes, kCommAcrossBytes); others are ignored.
  void AddEvents(const std::vector<Event>& events);
};

// TensorBoard's smoothing: an exponential moving average with weight w,
// debiased at the start (so the first value is the first point), skipping
// non-finite points.
std::vector<double> SmoothedLikeTensorBoard(const std::vector<double>& y, double weight);

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
