// SVG charts: well-formed output, legends, escaping, degenerate data, and
// the tick algorithms.
#include "monitor/svg_chart.h"

#include <cmath>
#include <limits>
#include <string>

#include "gtest/gtest.h"
#include "xml_check.h"

namespace zt::monitor {
namespace {

using testing::CheckXml;

int Count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// Mantissa of a positive step: 1, 2 or 5.
bool IsNiceStep(double step) {
  const double mant = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
  return std::fabs(mant - 1) < 1e-6 || std::fabs(mant - 2) < 1e-6 || std::fabs(mant - 5) < 1e-6;
}

TEST(NiceTicksTest, Ranges) {
  const struct {
    double lo, hi;
    int max_ticks;
  } cases[] = {{0, 1, 6},   {0, 10, 6},      {0.13, 0.87, 5},  {2.31, 2.33, 6}, {-3.7, 12.1, 6},
               {0, 500, 6}, {1e-7, 3e-7, 4}, {1e6, 1.05e6, 6}, {5, 5, 6},       {0, 0, 6},
               {-2, -2, 6}, {10, 0, 6},      {0, 123456, 8}};
  for (const auto& c : cases) {
    const std::vector<double> t = NiceTicks(c.lo, c.hi, c.max_ticks);
    SCOPED_TRACE(::testing::Message() << "[" << c.lo << ", " << c.hi << "]");
    ASSERT_GE(t.size(), 2u);
    EXPECT_LE(t.size(), static_cast<size_t>(c.max_ticks + 2));
    EXPECT_LE(t.front(), std::min(c.lo, c.hi));
    EXPECT_GE(t.back(), std::max(c.lo, c.hi));
    const double step = t[1] - t[0];
    EXPECT_TRUE(IsNiceStep(step)) << step;
    for (size_t i = 0; i < t.size(); ++i) {
      EXPECT_NEAR(t[i], t[0] + step * static_cast<double>(i), step * 1e-6);
      EXPECT_NEAR(t[i] / step, std::round(t[i] / step), 1e-6) << t[i];  // a multiple of the step
    }
    if (c.lo != c.hi) {
      // Covers the data tightly: less than one step of slack at each end.
      EXPECT_GT(t.front() + step, std::min(c.lo, c.hi));
      EXPECT_LT(t.back() - step, std::max(c.lo, c.hi));
    }
  }
  EXPECT_EQ(NiceTicks(0, 1, 6), (std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}));
  EXPECT_EQ(NiceTicks(0, 500, 6), (std::vector<double>{0, 100, 200, 300, 400, 500}));
  EXPECT_EQ(NiceTicks(NAN, 1), (std::vector<double>{0, 1}));
}

TEST(NiceTicksTest, LogTicks) {
  EXPECT_EQ(LogTicks(3e-5, 2e-3), (std::vector<double>{1e-5, 1e-4, 1e-3, 1e-2}));
  EXPECT_EQ(LogTicks(5, 5), (std::vector<double>{1, 10}));
  const std::vector<double> wide = LogTicks(1e-10, 1e10, 8);
  EXPECT_LE(wide.size(), 9u);
  EXPECT_LE(wide.front(), 1e-10);
  EXPECT_GE(wide.back(), 1e10);
}

TEST(FormatTickTest, Labels) {
  EXPECT_EQ(FormatTick(0, 0.2), "0");
  EXPECT_EQ(FormatTick(0.6000000000000001, 0.2), "0.6");
  EXPECT_EQ(FormatTick(2.325, 0.005), "2.325");
  EXPECT_EQ(FormatTick(0.25, 0.25), "0.25");
  EXPECT_EQ(FormatTick(300, 100), "300");
  EXPECT_EQ(FormatTick(12000, 2000), "12k");
  EXPECT_EQ(FormatTick(1500000, 500000), "1.5M");
  EXPECT_EQ(FormatTick(1e-5, 1e-5), "1e-05");
  EXPECT_EQ(FormatTick(-3, 1), "-3");
}

TEST(SvgChartTest, LineChartIsWellFormed) {
  Series train{"train <loss> & co", {0, 10, 20, 30}, {3.0, 2.5, 2.2, 2.1}};
  Series eval{"eval", {10, 30}, {2.6, 2.3}};
  ChartOptions o;
  o.title = "Loss \"A&B\"";
  o.x_label = "step";
  o.y_label = "loss";
  const std::string svg = LineChartSvg({train, eval}, o);
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  int elements = 0;
  EXPECT_EQ(CheckXml(svg, {}, &elements), "");
  EXPECT_GT(elements, 20);
  EXPECT_NE(svg.find("train &lt;loss&gt; &amp; co"), std::string::npos);
  EXPECT_NE(svg.find(">eval</text>"), std::string::npos);
  EXPECT_NE(svg.find("Loss &quot;A&amp;B&quot;"), std::string::npos);
  EXPECT_EQ(Count(svg, "<polyline points=\"") - 1 /* the axes */, 2);
  EXPECT_NE(svg.find("#4e79a7"), std::string::npos);  // two distinct colours
  EXPECT_NE(svg.find("#f28e2b"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(SvgChartTest, DegenerateData) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const struct {
    const char* what;
    std::vector<Series> series;
    int polylines, circles;
  } cases[] = {
      {"no series", {}, 0, 0},
      {"empty series", {{"e", {}, {}}}, 0, 0},
      {"single point", {{"p", {5}, {1.5}}}, 0, 1},
      {"constant y", {{"c", {1, 2, 3}, {7, 7, 7}}}, 1, 0},
      {"constant zero", {{"z", {1, 2}, {0, 0}}}, 1, 0},
      {"NaN splits the line", {{"n", {1, 2, 3, 4, 5, 6}, {1, 2, nan, 3, 4, inf}}}, 2, 0},
      {"NaN leaves a lone point", {{"n", {1, 2, 3}, {1, nan, 3}}}, 0, 2},
      {"all NaN", {{"n", {1, 2}, {nan, nan}}}, 0, 0},
      {"mismatched lengths", {{"m", {1, 2, 3}, {1, 2}}}, 1, 0},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string svg = LineChartSvg(c.series, ChartOptions{});
    EXPECT_EQ(CheckXml(svg), "");
    EXPECT_EQ(Count(svg, "<polyline") - 1, c.polylines);
    EXPECT_EQ(Count(svg, "<circle"), c.circles);
    EXPECT_EQ(svg.find("nan"), std::string::npos) << svg;
    EXPECT_EQ(svg.find("inf"), std::string::npos) << svg;
    const bool no_data = c.polylines == 0 && c.circles == 0;
    EXPECT_EQ(svg.find("no data") != std::string::npos, no_data);
  }
}

TEST(SvgChartTest, LogAxisSkipsNonPositive) {
  ChartOptions o;
  o.log_y = true;
  const std::string svg = LineChartSvg({{"lr", {0, 1, 2, 3}, {0, 1e-4, 1e-3, 1e-2}}}, o);
  EXPECT_EQ(CheckXml(svg), "");
  EXPECT_EQ(Count(svg, "<polyline") - 1, 1);
  EXPECT_NE(svg.find(">0.01<"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">0.0001<"), std::string::npos) << svg;
  EXPECT_EQ(svg.find(">0<"), std::string::npos) << svg;  // no zero on a log axis
}

TEST(SvgChartTest, BarChart) {
  ChartOptions o;
  o.title = "all_reduce busBw";
  o.y_label = "GB/s";
  const std::string svg =
      BarChartSvg({"1 MiB", "16 MiB", "256 MiB"}, {{"nccl", {}, {10, 80, 150}}, {"gloo", {}, {2, 5, NAN}}}, o);
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_EQ(CheckXml(svg), "");
  EXPECT_EQ(Count(svg, "<rect") - 1 /* background */ - 1 /* legend box */ - 2 /* legend swatches */, 5);
  EXPECT_NE(svg.find(">nccl</text>"), std::string::npos);
  EXPECT_NE(svg.find(">256 MiB</text>"), std::string::npos);
  // Long category names rotate instead of overlapping.
  const std::string rotated = BarChartSvg({std::string(40, 'x'), std::string(40, 'y'), "z", "w", "v", "u"},
                                          {{"s", {}, {1, 2, 3, 4, 5, 6}}}, ChartOptions{});
  EXPECT_EQ(CheckXml(rotated), "");
  EXPECT_NE(rotated.find("rotate(-35"), std::string::npos);
  // Nothing to draw.
  EXPECT_NE(BarChartSvg({}, {}, ChartOptions{}).find("no data"), std::string::npos);
}

}  // namespace
}  // namespace zt::monitor
