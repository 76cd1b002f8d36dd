// Progress line formatting and the TTY / log-file printing policy.
#include "monitor/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace zt::monitor {
namespace {

// Three significant digits for 1 <= v < 1000 ("1.50", "12.3", "950").
std::string ThreeDigits(double v) {
  if (v < 9.995) return absl::StrFormat("%.2f", v);
  if (v < 99.95) return absl::StrFormat("%.1f", v);
  return absl::StrFormat("%.0f", v);
}

// Divides `v` by `base` while it is >= `threshold`, then prints three digits.
std::string Scaled(double v, double base, double threshold, const char* const* units, int num_units, const char* sep) {
  if (!std::isfinite(v)) return "--";
  const bool neg = v < 0;
  v = std::fabs(v);
  int u = 0;
  while (u + 1 < num_units && v >= threshold) {
    v /= base;
    ++u;
  }
  return absl::StrCat(neg ? "-" : "", ThreeDigits(v), sep, units[u]);
}

}  // namespace

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--";
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  if (s < 60) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  if (s < 86400) return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
  return absl::StrFormat("%dd%02dh", s / 86400, (s % 86400) / 3600);
}

std::string FormatBytes(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (std::isfinite(bytes) && std::fabs(bytes) < 1024) return absl::StrFormat("%.0f B", bytes);
  return Scaled(bytes, 1024.0, 1024.0, kUnits, 6, " ");
}

std::string FormatRate(double per_sec) {
  static const char* const kUnits[] = {"", "k", "M", "G", "T"};
  return Scaled(per_sec, 1000.0, 999.5, kUnits, 5, "");
}

std::string FormatProgressLine(const ProgressInfo& info, int64_t total_steps, int bar_width) {
  std::string line;
  if (total_steps > 0) {
    const double frac = std::clamp(static_cast<double>(info.step) / static_cast<double>(total_steps), 0.0, 1.0);
    const int filled = static_cast<int>(frac * bar_width);
    absl::StrAppend(&line, "step ", info.step, "/", total_steps, " [", std::string(filled, '#'),
                    std::string(std::max(0, bar_width - filled), '.'), "] ", static_cast<int>(std::floor(frac * 100.0)),
                    "%");
  } else {
    absl::StrAppend(&line, "step ", info.step);
  }
  absl::StrAppend(&line, " | loss ",
                  std::isfinite(info.loss) ? absl::StrFormat("%.4g", info.loss) : absl::StrFormat("%f", info.loss));
  absl::StrAppend(&line, " | lr ", absl::StrFormat("%.1e", info.lr));
  if (info.items_per_sec > 0) {
    absl::StrAppend(&line, " | ", FormatRate(info.items_per_sec), " ",
                    info.items_name != nullptr ? info.items_name : "items", "/s");
  }
  const int64_t done = info.step - info.first_step;
  if (total_steps > 0 && done > 0 && info.elapsed_sec > 0) {
    const double remaining = static_cast<double>(std::max<int64_t>(0, total_steps - info.step)) * info.elapsed_sec /
                             static_cast<double>(done);
    absl::StrAppend(&line, " | ETA ", FormatDuration(remaining));
  }
  if (info.memory_bytes > 0) absl::StrAppend(&line, " | mem ", FormatBytes(static_cast<double>(info.memory_bytes)));
  return line;
}

ProgressBar::ProgressBar(const ProgressOptions& options) : options_(options) {
  if (options_.out == nullptr) options_.out = stderr;
  tty_ = options_.tty.has_value() ? *options_.tty : ::isatty(::fileno(options_.out)) != 0;
}

ProgressBar::~ProgressBar() { Finish(); }

void ProgressBar::Update(const ProgressInfo& info) {
  const bool last = options_.total_steps > 0 && info.step >= options_.total_steps;
  const double since = info.elapsed_sec - last_print_sec_;
  bool due;
  if (tty_) {
    due = !drawn_ || last || since >= options_.redraw_interval_sec;
  } else {
    due = !drawn_ || last || since >= options_.print_every_sec ||
          (options_.print_every_steps > 0 && info.step - last_print_step_ >= options_.print_every_steps);
  }
  if (!due || (drawn_ && info.step == last_print_step_ && !tty_)) {
    if (!drawn_ || info.step != last_print_step_) pending_ = info;
    return;
  }
  Print(info, last);
}

void ProgressBar::Print(const ProgressInfo& info, bool last) {
  pending_.reset();
  const std::string line = FormatProgressLine(info, options_.total_steps, options_.bar_width);
  if (tty_) {
    // Pad with spaces over the rest of a longer previous line.
    const std::string pad(last_width_ > line.size() ? last_width_ - line.size() : 0, ' ');
    std::fprintf(options_.out, "\r%s%s", line.c_str(), pad.c_str());
    line_open_ = true;
  } else {
    std::fprintf(options_.out, "%s\n", line.c_str());
  }
  std::fflush(options_.out);
  drawn_ = true;
  last_width_ = line.size();
  last_print_sec_ = info.elapsed_sec;
  last_print_step_ = info.step;
  if (tty_ && last) Finish();
}

void ProgressBar::Finish() {
  if (pending_.has_value()) Print(*pending_, /*last=*/false);
  if (tty_ && line_open_) {
    std::fputc('\n', options_.out);
    std::fflush(options_.out);
    line_open_ = false;
    last_width_ = 0;
  }
}

}  // namespace zt::monitor
