#include "benchmarks/results.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "util/file_io.h"

namespace zt::bench {
namespace {

constexpr absl::string_view kResultPrefix = "RESULT ";
constexpr absl::string_view kContextPrefix = "### ";
constexpr absl::string_view kSummaryPrefix = "SUMMARY: ";
constexpr absl::string_view kMachinePrefix = "cpu: ";  // SystemInfoLine()

bool ValidKey(absl::string_view key) {
  if (key.empty()) return false;
  for (char c : key) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

// "k=v k=v" -> fields; an error names `where`.
absl::Status ParseFields(absl::string_view text, const std::string& where,
                         std::vector<std::pair<std::string, std::string>>* out) {
  for (absl::string_view token : absl::StrSplit(text, ' ', absl::SkipWhitespace())) {
    const size_t eq = token.find('=');
    if (eq == absl::string_view::npos || !ValidKey(token.substr(0, eq))) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": '", token, "' is not key=value with a key of [a-z0-9_]"));
    }
    out->emplace_back(std::string(token.substr(0, eq)), std::string(token.substr(eq + 1)));
  }
  return absl::OkStatus();
}

bool AsNumber(const std::string& text, double* out) {
  double v = 0;
  if (!absl::SimpleAtod(text, &v) || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

}  // namespace

void ResultRow::Put(absl::string_view key, std::string value) {
  std::string k(key);
  if (!ValidKey(k)) k = "invalid_key";  // programming error; keeps the line parseable
  for (auto& [name, v] : fields_) {
    if (name == k) {
      v = std::move(value);
      return;
    }
  }
  fields_.emplace_back(std::move(k), std::move(value));
}

ResultRow& ResultRow::Set(absl::string_view key, double value) {
  Put(key, absl::StrFormat("%.6g", value));
  return *this;
}

ResultRow& ResultRow::Set(absl::string_view key, int64_t value) {
  Put(key, absl::StrCat(value));
  return *this;
}

ResultRow& ResultRow::Set(absl::string_view key, absl::string_view value) {
  std::string v(value);
  for (char& c : v) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') c = '_';
  }
  if (v.empty()) v = "-";
  Put(key, std::move(v));
  return *this;
}

std::string ResultRow::Get(absl::string_view key) const {
  for (const auto& [name, v] : fields_) {
    if (name == key) return v;
  }
  return "";
}

bool ResultRow::GetNumber(absl::string_view key, double* out) const { return AsNumber(Get(key), out); }

std::string ResultRow::Line() const {
  std::string line = "RESULT";
  for (const auto& [k, v] : fields_) absl::StrAppend(&line, " ", k, "=", v);
  return line;
}

absl::StatusOr<BenchLog> ParseBenchLog(absl::string_view text, absl::string_view source) {
  BenchLog log;
  std::vector<std::pair<std::string, std::string>> context;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripTrailingAsciiWhitespace(line);
    const std::string where = absl::StrCat(source, ":", line_no);
    // Rank programs prefix their lines under a launcher ("[rank 0] ...").
    absl::string_view body = line;
    if (absl::StartsWith(body, "[rank ")) {
      const size_t close = body.find("] ");
      if (close != absl::string_view::npos) body = body.substr(close + 2);
    }
    if (body == absl::StripTrailingAsciiWhitespace(kResultPrefix)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": a RESULT line without fields"));
    }
    if (absl::ConsumePrefix(&body, kContextPrefix)) {
      context.clear();
      const absl::Status st = ParseFields(body, where, &context);
      if (!st.ok()) return st;
    } else if (absl::ConsumePrefix(&body, kResultPrefix)) {
      std::vector<std::pair<std::string, std::string>> fields;
      const absl::Status st = ParseFields(body, where, &fields);
      if (!st.ok()) return st;
      if (fields.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": a RESULT line without fields"));
      ResultRow row;
      for (const auto& [k, v] : context) row.Set(k, v);
      for (const auto& [k, v] : fields) row.Set(k, v);
      log.rows.push_back(std::move(row));
    } else if (absl::ConsumePrefix(&body, kSummaryPrefix)) {
      log.summary = std::string(body);
    } else if (log.machine.empty() && absl::StartsWith(body, kMachinePrefix)) {
      log.machine = std::string(body);
    }
  }
  return log;
}

std::string BenchLogJson(absl::string_view benchmark, const BenchLog& log, const RunInfo& run) {
  nlohmann::ordered_json doc;
  doc["benchmark"] = std::string(benchmark);
  doc["machine"] = log.machine;
  doc["summary"] = log.summary;
  doc["run"] = {{"command", run.command}, {"date", run.date}, {"commit", run.commit}, {"seconds", run.seconds}};
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const ResultRow& r : log.rows) {
    nlohmann::ordered_json row = nlohmann::ordered_json::object();
    for (const auto& [k, v] : r.fields()) {
      double number = 0;
      if (AsNumber(v, &number)) {
        row[k] = number;
      } else {
        row[k] = v;
      }
    }
    rows.push_back(std::move(row));
  }
  doc["rows"] = std::move(rows);
  return doc.dump(1) + "\n";
}

absl::StatusOr<std::pair<BenchLog, RunInfo>> ReadBenchJson(absl::string_view json_text, absl::string_view source) {
  // Ordered: rows keep their fields in the order the benchmark printed them.
  const nlohmann::ordered_json doc = nlohmann::ordered_json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not a JSON object (rerun the benchmark)"));
  }
  auto text = [&](const nlohmann::ordered_json& obj, const char* key) -> std::string {
    const auto it = obj.find(key);
    return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  BenchLog log;
  RunInfo run;
  log.machine = text(doc, "machine");
  log.summary = text(doc, "summary");
  if (const auto r = doc.find("run"); r != doc.end() && r->is_object()) {
    run.command = text(*r, "command");
    run.date = text(*r, "date");
    run.commit = text(*r, "commit");
    if (const auto s = r->find("seconds"); s != r->end() && s->is_number()) run.seconds = s->get<double>();
  }
  const auto rows = doc.find("rows");
  if (rows == doc.end() || !rows->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": no \"rows\" array (rerun the benchmark)"));
  }
  for (const nlohmann::ordered_json& r : *rows) {
    if (!r.is_object()) return absl::InvalidArgumentError(absl::StrCat(source, ": a row is not an object"));
    ResultRow row;
    for (const auto& [k, v] : r.items()) {
      if (v.is_number()) {
        row.Set(k, absl::StrFormat("%.17g", v.get<double>()));
      } else if (v.is_string()) {
        row.Set(k, v.get<std::string>());
      } else {
        return absl::InvalidArgumentError(absl::StrCat(source, ": row field '", k, "' is neither number nor string"));
      }
    }
    log.rows.push_back(std::move(row));
  }
  return std::make_pair(std::move(log), std::move(run));
}

ResultLog::ResultLog(std::string benchmark, std::string json_path, std::ostream& out)
    : benchmark_(std::move(benchmark)), json_path_(std::move(json_path)), out_(out) {}

void ResultLog::Add(const ResultRow& row) {
  out_ << row.Line() << "\n";
  log_.rows.push_back(row);
}

absl::Status ResultLog::Finish(absl::string_view summary) {
  log_.summary = std::string(summary);
  out_ << kSummaryPrefix << summary << "\n";
  out_.flush();
  if (json_path_.empty()) return absl::OkStatus();
  return zt::WriteFileAtomically(json_path_, BenchLogJson(benchmark_, log_, RunInfo{}));
}

}  // namespace zt::bench
