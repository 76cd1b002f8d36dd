#include "train/run_history.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "monitor/report.h"

namespace zt::train {
namespace {

// (name, member) pairs, in the order they are saved.
using Series = std::vector<double> RunHistory::*;

ckpt::Value ToList(const std::vector<double>& v) {
  ckpt::List l;
  l.reserve(v.size());
  for (double x : v) l.emplace_back(x);
  return ckpt::Value(std::move(l));
}

bool FromList(const ckpt::Value* v, std::vector<double>* out) {
  if (v == nullptr || !(v->is_list() || v->is_tuple())) return false;
  out->clear();
  for (const ckpt::Value& x : v->AsList()) {
    if (!x.is_double() && !x.is_int()) return false;
    out->push_back(x.AsDouble());
  }
  return true;
}

}  // namespace

struct ReportBuilder {
  static const std::vector<std::pair<const char*, Series>>& Fields() {
    static const std::vector<std::pair<const char*, Series>> fields = {
        {"step", &RunHistory::step_},
        {"loss", &RunHistory::loss_},
        {"lr", &RunHistory::lr_},
        {"rate", &RunHistory::rate_},
        {"memory", &RunHistory::memory_},
        {"eval_step", &RunHistory::eval_step_},
        {"eval_loss", &RunHistory::eval_loss_},
        {"eval_metric", &RunHistory::eval_metric_},
    };
    return fields;
  }
};

void RunHistory::AddStep(int64_t step, double loss, double lr, double items_per_sec, double memory_bytes) {
  step_.push_back(static_cast<double>(step));
  loss_.push_back(loss);
  lr_.push_back(lr);
  rate_.push_back(items_per_sec);
  memory_.push_back(memory_bytes);
}

void RunHistory::AddEval(int64_t step, double loss, double metric) {
  eval_step_.push_back(static_cast<double>(step));
  eval_loss_.push_back(loss);
  eval_metric_.push_back(metric);
}

ckpt::Value RunHistory::ToValue() const {
  ckpt::Dict d;
  for (const auto& [name, member] : ReportBuilder::Fields()) d.Set(ckpt::Value(name), ToList(this->*member));
  return ckpt::Value(std::move(d));
}

RunHistory RunHistory::FromValue(const ckpt::Value& v) {
  RunHistory h;
  if (!v.is_dict()) return RunHistory();
  for (const auto& [name, member] : ReportBuilder::Fields()) {
    if (!FromList(v.AsDict().Find(name), &(h.*member))) return RunHistory();
  }
  const size_t n = h.step_.size(), e = h.eval_step_.size();
  if (h.loss_.size() != n || h.lr_.size() != n || h.rate_.size() != n || h.memory_.size() != n ||
      h.eval_loss_.size() != e || h.eval_metric_.size() != e) {
    return RunHistory();
  }
  return h;
}

absl::Status WriteReport(const std::string& path, const ReportInfo& info, const RunHistory& h, bool language_model) {
  monitor::ReportData d;
  d.title = info.title;
  d.summary = info.rows;
  d.items_name = language_model ? "tokens" : "samples";
  d.train_loss.x = h.step_;
  d.train_loss.y = h.loss_;
  d.eval_loss.x = h.eval_step_;
  d.eval_loss.y = h.eval_loss_;
  d.throughput.x = h.step_;
  d.throughput.y = h.rate_;
  d.memory_bytes.x = h.step_;
  d.memory_bytes.y = h.memory_;
  d.lr.x = h.step_;
  d.lr.y = h.lr_;
  if (!h.eval_step_.empty()) {
    const double last = h.eval_metric_.back();
    d.summary.emplace_back(language_model ? "final eval perplexity" : "final eval accuracy",
                           language_model ? absl::StrFormat("%.3f", last) : absl::StrFormat("%.2f%%", 100 * last));
  }
  return monitor::WriteTrainingReport(path, d);
}

}  // namespace zt::train
