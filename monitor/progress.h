// The progress line rank 0 prints during training:
//   step 120/500 [#####...............] 24% | loss 2.314 | lr 3.0e-04 | 12.3k tok/s | ETA 1m32s | mem 412 MiB
// On a terminal it redraws in place ('\r'); in a log file it prints whole
// lines now and then, so logs stay readable. Not thread-safe; one bar per
// stream.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace zt::monitor {

// 45 -> "45s", 92 -> "1m32s", 7500 -> "2h05m", 273600 -> "3d04h";
// negative, NaN or infinite -> "--".
std::string FormatDuration(double seconds);
// 512 -> "512 B", 1536 -> "1.50 KiB", 412 * 2^20 -> "412 MiB", 2^30 * 1.5 -> "1.50 GiB"
// (three significant digits, up to four below the next unit; B .. PiB).
std::string FormatBytes(double bytes);
// 3.5 -> "3.50", 950 -> "950", 12345 -> "12.3k", 1.5e6 -> "1.50M", 2e9 -> "2.00G"
// (three significant digits).
std::string FormatRate(double per_sec);

struct ProgressInfo {
  int64_t step = 0;  // steps done (1-based after the first step)
  double loss = 0.0;
  double lr = 0.0;
  double items_per_sec = 0.0;      // <= 0: not shown
  const char* items_name = "tok";  // "tok" or "samples"
  int64_t memory_bytes = 0;        // <= 0: not shown
  double elapsed_sec = 0.0;        // since training started; drives the ETA and throttling
  int64_t first_step = 0;          // the step this process started at (a resumed run: > 0); the
                                   // ETA uses the rate of steps since then
};

struct ProgressOptions {
  int64_t total_steps = 0;  // <= 0: unknown (no bar, no ETA)
  std::optional<bool> tty;  // unset: isatty(fileno(out))
  std::FILE* out = stderr;
  double print_every_sec = 10.0;     // not a TTY: a line at most this often...
  int64_t print_every_steps = 0;     // ...or every N steps when > 0; always the first and last
  double redraw_interval_sec = 0.1;  // TTY: at most ~10 redraws per second
  int bar_width = 20;
};

// The text of one progress line (no '\r' or '\n').
std::string FormatProgressLine(const ProgressInfo& info, int64_t total_steps, int bar_width = 20);

class ProgressBar {
 public:
  explicit ProgressBar(const ProgressOptions& options);
  ~ProgressBar();  // Finish()

  // Draws or prints the line if due (see ProgressOptions). Steps should not
  // decrease; timing uses info.elapsed_sec only.
  void Update(const ProgressInfo& info);
  // Shows the last update if it was throttled away, and ends a TTY line with
  // '\n' (so later output starts on a fresh line). Idempotent; the destructor calls it.
  void Finish();
  bool tty() const { return tty_; }

 private:
  void Print(const ProgressInfo& info, bool last);

  ProgressOptions options_;
  bool tty_ = false;
  bool drawn_ = false;      // something printed since construction (or the last Finish)
  bool line_open_ = false;  // TTY: the cursor is at the end of a drawn line
  double last_print_sec_ = 0.0;
  int64_t last_print_step_ = 0;
  size_t last_width_ = 0;
  std::optional<ProgressInfo> pending_;  // the latest update not shown
};

}  // namespace zt::monitor
