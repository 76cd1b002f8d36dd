#include "train/run_history.h"

#include <cmath>
#include <limits>
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
  // Per-step curves a checkpoint may lack (written before them).
  static const std::vector<std::pair<const char*, Series>>& OptionalFields() {
    static const std::vector<std::pair<const char*, Series>> fields = {
        {"memory_min", &RunHistory::memory_min_}, {"memory_max", &RunHistory::memory_max_},
        {"grad_norm", &RunHistory::grad_norm_},   {"step_time", &RunHistory::step_time_},
        {"sent_shard", &RunHistory::sent_shard_}, {"sent_across", &RunHistory::sent_across_},
        {"wait_shard", &RunHistory::wait_shard_}, {"wait_across", &RunHistory::wait_across_},
    };
    return fields;
  }
};

void RunHistory::AddStep(const Step& s) {
  step_.push_back(static_cast<double>(s.step));
  loss_.push_back(s.loss);
  lr_.push_back(s.lr);
  rate_.push_back(s.items_per_sec);
  memory_.push_back(s.memory_bytes);
  memory_min_.push_back(s.memory_min);
  memory_max_.push_back(s.memory_max);
  grad_norm_.push_back(s.grad_norm);
  step_time_.push_back(s.step_sec);
  sent_shard_.push_back(s.sent_shard);
  sent_across_.push_back(s.sent_across);
  wait_shard_.push_back(s.wait_shard);
  wait_across_.push_back(s.wait_across);
}

void RunHistory::AddEval(int64_t step, double loss, double metric) {
  eval_step_.push_back(static_cast<double>(step));
  eval_loss_.push_back(loss);
  eval_metric_.push_back(metric);
}

void RunHistory::AddSample(int64_t step, const std::string& prompt, const std::string& text) {
  samples_.push_back({step, prompt, text});
}

ckpt::Value RunHistory::ToValue() const {
  ckpt::Dict d;
  for (const auto& [name, member] : ReportBuilder::Fields()) d.Set(ckpt::Value(name), ToList(this->*member));
  for (const auto& [name, member] : ReportBuilder::OptionalFields()) {
    d.Set(ckpt::Value(name), ToList(this->*member));
  }
  if (!samples_.empty()) {
    ckpt::List samples;
    for (const Sample& s : samples_) samples.push_back(ckpt::Value(ckpt::List{s.step, s.prompt, s.text}));
    d.Set(ckpt::Value("samples"), ckpt::Value(std::move(samples)));
  }
  return ckpt::Value(std::move(d));
}

RunHistory RunHistory::FromValue(const ckpt::Value& v) {
  RunHistory h;
  if (!v.is_dict()) return RunHistory();
  for (const auto& [name, member] : ReportBuilder::Fields()) {
    if (!FromList(v.AsDict().Find(name), &(h.*member))) return RunHistory();
  }
  const size_t n = h.step_.size(), e = h.eval_step_.size();
  for (const auto& [name, member] : ReportBuilder::OptionalFields()) {
    const ckpt::Value* field = v.AsDict().Find(name);
    if (field == nullptr) {
      (h.*member).assign(n, std::numeric_limits<double>::quiet_NaN());
    } else if (!FromList(field, &(h.*member)) || (h.*member).size() != n) {
      return RunHistory();
    }
  }
  if (h.loss_.size() != n || h.lr_.size() != n || h.rate_.size() != n || h.memory_.size() != n ||
      h.eval_loss_.size() != e || h.eval_metric_.size() != e) {
    return RunHistory();
  }
  // Samples are optional; malformed entries are skipped, not a reason to drop the curves.
  if (const ckpt::Value* samples = v.AsDict().Find("samples"); samples != nullptr && samples->is_list()) {
    for (const ckpt::Value& s : samples->AsList()) {
      if (!(s.is_list() || s.is_tuple()) || s.AsList().size() != 3) continue;
      const ckpt::List& f = s.AsList();
      if (f[0].is_int() && f[1].is_string() && f[2].is_string()) {
        h.samples_.push_back({f[0].AsInt(), f[1].AsString(), f[2].AsString()});
      }
    }
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
  d.memory_min = {"smallest rank", h.step_, h.memory_min_};
  d.memory_max = {"largest rank", h.step_, h.memory_max_};
  d.grad_norm.x = h.step_;
  d.grad_norm.y = h.grad_norm_;
  d.step_time.x = h.step_;
  d.step_time.y = h.step_time_;
  d.lr.x = h.step_;
  d.lr.y = h.lr_;
  d.sent_shard.x = h.step_;
  d.sent_shard.y = h.sent_shard_;
  d.sent_across.x = h.step_;
  d.sent_across.y = h.sent_across_;
  d.wait_shard.x = h.step_;
  d.wait_shard.y = h.wait_shard_;
  d.wait_across.x = h.step_;
  d.wait_across.y = h.wait_across_;
  for (const RunHistory::Sample& s : h.samples_) d.samples.push_back({s.step, s.prompt, s.text});
  if (!h.loss_.empty()) {
    d.summary.emplace_back("final train loss",
                           absl::StrFormat("%.4f (step %d)", h.loss_.back(), static_cast<int64_t>(h.step_.back())));
  }
  if (!h.eval_step_.empty()) {
    const double last = h.eval_metric_.back();
    d.summary.emplace_back("final eval loss", absl::StrFormat("%.4f (step %d)", h.eval_loss_.back(),
                                                              static_cast<int64_t>(h.eval_step_.back())));
    d.summary.emplace_back(language_model ? "final eval perplexity" : "final eval accuracy",
                           language_model ? absl::StrFormat("%.3f", last) : absl::StrFormat("%.2f%%", 100 * last));
  }
  return monitor::WriteTrainingReport(path, d);
}

}  // namespace zt::train
