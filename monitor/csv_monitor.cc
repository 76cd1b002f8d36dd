// CSV monitor: a FILE* per tag, opened in append mode on first use.
#include "monitor/csv_monitor.h"

#include <errno.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "util/file_io.h"
#include "util/status.h"

namespace zt::monitor {

absl::StatusOr<std::unique_ptr<CsvMonitor>> CsvMonitor::Create(const MonitorOptions& options) {
  std::string dir = JoinPath(options.output_path, options.job_name);
  if (dir.empty()) dir = ".";
  ZT_RETURN_IF_ERROR(MakeDirs(dir, "csv_monitor.output_path"));
  return std::unique_ptr<CsvMonitor>(new CsvMonitor(std::move(dir)));
}

std::string CsvMonitor::FileNameForTag(const std::string& tag) {
  std::string name = tag;
  for (char& c : name) {
    if (c == '/' || c == ' ') c = '_';
  }
  return name + ".csv";
}

std::string CsvMonitor::FormatValue(double value) {
  // Python's repr(float), which DeepSpeed's csv.writer rows contain: the
  // shortest digits that read back exactly, positional for exponents in
  // [-4, 16), else scientific with a two-digit exponent; ".0" on integers.
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);  // "-1.2345e-05"
  const size_t e = sci.find('e');
  const bool neg = sci[0] == '-';
  std::string digits;
  for (size_t i = neg ? 1 : 0; i < e; ++i) {
    if (sci[i] != '.') digits.push_back(sci[i]);
  }
  const int exp = std::atoi(sci.c_str() + e + 1);
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exp) + 1) + "." + digits.substr(static_cast<size_t>(exp) + 1);
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += absl::StrCat(exp < 0 ? "e-" : "e+", exp < 0 ? (-exp < 10 ? "0" : "") : (exp < 10 ? "0" : ""),
                        exp < 0 ? -exp : exp);
  }
  return out;
}

absl::StatusOr<std::FILE*> CsvMonitor::FileFor(const std::string& tag) {
  const std::string file_name = FileNameForTag(tag);
  auto it = files_.find(file_name);
  if (it != files_.end()) return it->second.get();
  const std::string path = JoinPath(dir_, file_name);
  FilePtr f(std::fopen(path.c_str(), "a"));
  if (f == nullptr) {
    return absl::PermissionDeniedError(absl::StrCat("cannot open ", path, " for appending: ", std::strerror(errno),
                                                    "; set csv_monitor.output_path to a writable directory"));
  }
  if (std::fseek(f.get(), 0, SEEK_END) == 0 && std::ftell(f.get()) == 0) {
    const size_t slash = tag.rfind('/');
    const std::string header = slash == std::string::npos ? tag : tag.substr(slash + 1);
    std::fprintf(f.get(), "step,%s\n", header.c_str());
  }
  std::FILE* raw = f.get();
  files_.emplace(file_name, std::move(f));
  return raw;
}

absl::Status CsvMonitor::Write(const std::vector<Event>& events) {
  for (const Event& e : events) {
    ZT_ASSIGN_OR_RETURN(std::FILE * f, FileFor(e.tag));
    const std::string row = absl::StrCat(e.step, ",", FormatValue(e.value), "\n");
    if (std::fwrite(row.data(), 1, row.size(), f) != row.size()) {
      return absl::DataLossError(
          absl::StrCat("cannot write to ", JoinPath(dir_, FileNameForTag(e.tag)), ": ", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

absl::Status CsvMonitor::Flush() {
  for (auto& [file_name, f] : files_) {
    if (std::fflush(f.get()) != 0) {
      return absl::DataLossError(absl::StrCat("cannot write ", JoinPath(dir_, file_name), ": ", std::strerror(errno),
                                              "; free disk space or set csv_monitor.output_path elsewhere"));
    }
  }
  return absl::OkStatus();
}

}  // namespace zt::monitor
