// Progress formatting helpers, the line layout, and what the bar prints on a
// TTY and into a log file.
#include "monitor/progress.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace zt::monitor {
namespace {

TEST(ProgressFormatTest, Duration) {
  const struct {
    double sec;
    const char* want;
  } cases[] = {{0, "0s"},        {45, "45s"},     {59.4, "59s"},   {59.6, "1m00s"},   {92, "1m32s"},
               {3599, "59m59s"}, {3600, "1h00m"}, {7500, "2h05m"}, {86399, "23h59m"}, {273600, "3d04h"},
               {-1, "--"},       {NAN, "--"},     {INFINITY, "--"}};
  for (const auto& c : cases) EXPECT_EQ(FormatDuration(c.sec), c.want) << c.sec;
}

TEST(ProgressFormatTest, Bytes) {
  const struct {
    double bytes;
    const char* want;
  } cases[] = {{0, "0 B"},
               {512, "512 B"},
               {1023, "1023 B"},
               {1024, "1.00 KiB"},
               {1536, "1.50 KiB"},
               {412.0 * (1 << 20), "412 MiB"},
               {12.34 * (1 << 20), "12.3 MiB"},
               {1.5 * (1 << 30), "1.50 GiB"},
               {80.0 * (1 << 30), "80.0 GiB"},
               {2.0 * 1024 * 1024 * 1024 * 1024, "2.00 TiB"}};
  for (const auto& c : cases) EXPECT_EQ(FormatBytes(c.bytes), c.want) << c.bytes;
}

TEST(ProgressFormatTest, Rate) {
  const struct {
    double rate;
    const char* want;
  } cases[] = {{0, "0.00"},      {3.5, "3.50"},    {42.25, "42.2"},  {950, "950"},   {999.4, "999"},
               {999.7, "1.00k"}, {12345, "12.3k"}, {1.5e6, "1.50M"}, {2e9, "2.00G"}, {NAN, "--"}};
  for (const auto& c : cases) EXPECT_EQ(FormatRate(c.rate), c.want) << c.rate;
}

TEST(ProgressFormatTest, Line) {
  ProgressInfo info;
  info.step = 120;
  info.loss = 2.3141;
  info.lr = 3e-4;
  info.items_per_sec = 12345;
  info.items_name = "tok";
  info.memory_bytes = 412LL << 20;
  info.elapsed_sec = 120 * 0.25;  // 0.25 s/step: 380 steps left = 95 s
  EXPECT_EQ(FormatProgressLine(info, 500, 20),
            "step 120/500 [####................] 24% | loss 2.314 | lr 3.0e-04 | 12.3k tok/s | ETA 1m35s | "
            "mem 412 MiB");
  // A resumed run (started at step 100): the rate is that of its own 20 steps.
  info.first_step = 100;
  info.elapsed_sec = 20 * 0.5;  // 0.5 s/step: 380 steps left = 190 s
  EXPECT_NE(FormatProgressLine(info, 500, 20).find("ETA 3m10s"), std::string::npos)
      << FormatProgressLine(info, 500, 20);
  info.first_step = 0;
  // Unknown total: no bar, no ETA; no throughput or memory when not given.
  info.items_per_sec = 0;
  info.memory_bytes = 0;
  EXPECT_EQ(FormatProgressLine(info, 0), "step 120 | loss 2.314 | lr 3.0e-04");
  info.loss = NAN;
  EXPECT_NE(FormatProgressLine(info, 0).find("loss nan"), std::string::npos);
}

// Runs `steps` updates at `sec_per_step` into an in-memory stream.
std::string Render(bool tty, int64_t total, int64_t steps, double sec_per_step, ProgressOptions options = {}) {
  char buf[1 << 16] = {};
  std::FILE* f = fmemopen(buf, sizeof(buf) - 1, "w");
  EXPECT_NE(f, nullptr);
  options.total_steps = total;
  options.tty = tty;
  options.out = f;
  {
    ProgressBar bar(options);
    EXPECT_EQ(bar.tty(), tty);
    for (int64_t s = 1; s <= steps; ++s) {
      ProgressInfo info;
      info.step = s;
      info.loss = 3.0 - 0.001 * static_cast<double>(s);
      info.lr = 1e-3;
      info.items_per_sec = 2000;
      info.items_name = "samples";
      info.memory_bytes = 3LL << 30;
      info.elapsed_sec = sec_per_step * static_cast<double>(s);
      bar.Update(info);
    }
  }
  std::fclose(f);
  return std::string(buf);
}

int Count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(ProgressBarTest, LogFilePrintsWholeLinesEveryTenSeconds) {
  // 100 steps at 1 s/step: the first step, then every 10 s, and the last: steps 1, 11, 21, ..., 91, 100.
  const std::string out = Render(false, 100, 100, 1.0);
  EXPECT_EQ(Count(out, "\n"), 11) << out;
  EXPECT_EQ(Count(out, "\r"), 0);
  EXPECT_EQ(out.find("step 1/100 ["), 0u) << out;
  EXPECT_NE(out.find("step 11/100 "), std::string::npos) << out;
  EXPECT_EQ(out.find("step 12/100 "), std::string::npos) << out;
  EXPECT_NE(out.find("step 100/100 [####################] 100% | loss 2.9 | lr 1.0e-03 | 2.00k samples/s | ETA 0s | "
                     "mem 3.00 GiB\n"),
            std::string::npos)
      << out;
}

TEST(ProgressBarTest, LogFileEveryNSteps) {
  ProgressOptions options;
  options.print_every_steps = 25;
  options.print_every_sec = 1e9;
  // Unknown total: steps 1, 26, 51, 76, then 100 from Finish() (the destructor).
  const std::string out = Render(false, 0, 100, 0.01, options);
  EXPECT_EQ(Count(out, "\n"), 5) << out;
  EXPECT_NE(out.find("step 76 |"), std::string::npos) << out;
  EXPECT_EQ(out.find("step 77 |"), std::string::npos) << out;
  EXPECT_NE(out.find("step 100 |"), std::string::npos) << out;
}

TEST(ProgressBarTest, TtyRedrawsInPlaceThrottled) {
  // 1000 steps at 1 ms/step (1 s in all): about 10 redraws, one final newline.
  const std::string out = Render(true, 1000, 1000, 0.001);
  const int redraws = Count(out, "\r");
  EXPECT_GE(redraws, 9) << out;
  EXPECT_LE(redraws, 13) << out;
  EXPECT_EQ(Count(out, "\n"), 1);
  EXPECT_EQ(out.back(), '\n');
  EXPECT_NE(out.find("\rstep 1000/1000 [####################] 100%"), std::string::npos);  // always the last step
}

}  // namespace
}  // namespace zt::monitor
