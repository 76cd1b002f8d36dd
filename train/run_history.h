// The curves of one training run (loss, lr, throughput, memory of the
// ranks, gradient norm and step time per step; eval loss and perplexity or
// accuracy), kept by every rank, saved in
// checkpoints' client state so a resumed run's report shows the whole run,
// and drawn into the HTML report at the end.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "ckpt/format/value.h"

namespace zt::train {

struct ReportInfo {
  std::string title;
  std::vector<std::pair<std::string, std::string>> rows;  // shown as a table
};

class RunHistory {
 public:
  // One optimizer step. memory_bytes: this rank's; memory_min / memory_max:
  // over every rank. grad_norm: NaN where the run does not clip. sent_shard /
  // sent_across: the bytes rank 0 sent in this step inside its shard group
  // (the whole world under flat sharding) and across replicas
  // (hierarchical sharding; else NaN); NaN on one rank. wait_shard /
  // wait_across: the seconds rank 0 blocked on those groups' collectives.
  struct Step {
    int64_t step = 0;
    double loss = 0, lr = 0, items_per_sec = 0;
    double memory_bytes = 0, memory_min = 0, memory_max = 0;
    double grad_norm = 0, step_sec = 0;
    double sent_shard = std::numeric_limits<double>::quiet_NaN();
    double sent_across = std::numeric_limits<double>::quiet_NaN();
    double wait_shard = std::numeric_limits<double>::quiet_NaN();
    double wait_across = std::numeric_limits<double>::quiet_NaN();
  };
  void AddStep(const Step& s);
  void AddEval(int64_t step, double loss, double metric);  // metric: perplexity or accuracy
  // A continuation generated from `prompt` at an evaluation (--sample-prompts).
  void AddSample(int64_t step, const std::string& prompt, const std::string& text);

  double LastLoss() const { return loss_.empty() ? 0.0 : loss_.back(); }
  const std::vector<double>& steps() const { return step_; }
  const std::vector<double>& losses() const { return loss_; }

  // As a dict of float lists; FromValue ignores what it does not know and
  // returns an empty history for anything malformed (the history is a
  // convenience, never a reason to refuse a checkpoint). Curves added after
  // the first version (memory_min/max, grad_norm, step_time) are optional:
  // an older checkpoint's read as NaN (left out of the charts).
  ckpt::Value ToValue() const;
  static RunHistory FromValue(const ckpt::Value& v);

  friend struct ReportBuilder;
  friend absl::Status WriteReport(const std::string& path, const ReportInfo& info, const RunHistory& history,
                                  bool language_model);

 private:
  std::vector<double> step_, loss_, lr_, rate_, memory_;
  std::vector<double> memory_min_, memory_max_, grad_norm_, step_time_, sent_shard_, sent_across_, wait_shard_,
      wait_across_;
  std::vector<double> eval_step_, eval_loss_, eval_metric_;
  struct Sample {
    int64_t step = 0;
    std::string prompt, text;
  };
  std::vector<Sample> samples_;
};

// Writes the HTML report: info's rows, the final train loss (and eval loss
// and metric), and the curves -- train loss raw and smoothed with the eval
// points marked, throughput, the ranks' memory on an axis from 0, gradient
// norm, step time, lr.
absl::Status WriteReport(const std::string& path, const ReportInfo& info, const RunHistory& history,
                         bool language_model);

}  // namespace zt::train
