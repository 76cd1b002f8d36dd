// The curves of one training run (loss, lr, throughput, memory per step;
// eval loss and perplexity or accuracy), kept by every rank, saved in
// checkpoints' client state so a resumed run's report shows the whole run,
// and drawn into the HTML report at the end.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "ckpt/value.h"

namespace zt::train {

struct ReportInfo {
  std::string title;
  std::vector<std::pair<std::string, std::string>> rows;  // shown as a table
};

class RunHistory {
 public:
  void AddStep(int64_t step, double loss, double lr, double items_per_sec, double memory_bytes);
  void AddEval(int64_t step, double loss, double metric);  // metric: perplexity or accuracy

  double LastLoss() const { return loss_.empty() ? 0.0 : loss_.back(); }
  const std::vector<double>& steps() const { return step_; }
  const std::vector<double>& losses() const { return loss_; }

  // As a dict of float lists; FromValue ignores what it does not know and
  // returns an empty history for anything malformed (the history is a
  // convenience, never a reason to refuse a checkpoint).
  ckpt::Value ToValue() const;
  static RunHistory FromValue(const ckpt::Value& v);

  friend struct ReportBuilder;
  friend absl::Status WriteReport(const std::string& path, const ReportInfo& info, const RunHistory& history,
                                  bool language_model);

 private:
  std::vector<double> step_, loss_, lr_, rate_, memory_;
  std::vector<double> eval_step_, eval_loss_, eval_metric_;
};

// Writes the HTML report (loss, eval, throughput, memory and lr curves).
absl::Status WriteReport(const std::string& path, const ReportInfo& info, const RunHistory& history,
                         bool language_model);

}  // namespace zt::train
