// The report's charts against the data they were given: every drawn coordinate is mapped back
// through the plot geometry the <svg> declares and must land on its value; and the report of a
// run read from a metrics.jsonl (with a torn last line) has the runs' series, markers and header.
#include "lockstep/report/svg_chart.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include "lockstep/report/run_metrics.h"
#include "lockstep/report/run_report.h"

namespace lockstep::report {
namespace {

double AttrOf(const std::string& svg, const std::string& name) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(svg, m, std::regex(" " + name + "=\"([^\"]*)\""))) << name;
  return m.empty() ? NAN : std::stod(m[1]);
}

// The plot geometry an <svg> declares, to map pixels back to values.
struct Geometry {
  double xmin, xmax, ymin, ymax, left, right, top, bottom;
  explicit Geometry(const std::string& svg)
      : xmin(AttrOf(svg, "data-xmin")),
        xmax(AttrOf(svg, "data-xmax")),
        ymin(AttrOf(svg, "data-ymin")),
        ymax(AttrOf(svg, "data-ymax")),
        left(AttrOf(svg, "data-left")),
        right(AttrOf(svg, "data-right")),
        top(AttrOf(svg, "data-top")),
        bottom(AttrOf(svg, "data-bottom")) {}
  double X(double px) const { return xmin + (px - left) / (right - left) * (xmax - xmin); }
  double Y(double py) const { return ymin + (bottom - py) / (bottom - top) * (ymax - ymin); }
  // Half a rounding step of the drawn coordinates (0.1 px), in data units.
  double XTol() const { return 0.06 * (xmax - xmin) / (right - left); }
  double YTol() const { return 0.06 * (ymax - ymin) / (bottom - top); }
};

// The <g class="series"> element named `name`.
std::string SeriesGroup(const std::string& svg, const std::string& name) {
  const size_t at = svg.find("<g class=\"series\" data-series=\"" + name + "\"");
  if (at == std::string::npos) return "";
  return svg.substr(at, svg.find("</g>", at) - at);
}

// Every polyline's points in a fragment, one vector per polyline. Parsed by hand: libstdc++'s
// std::regex recurses once per character of `[^"]*`, which overflows the stack (under ASan's
// larger frames) on a points attribute of thousands of pairs.
std::vector<std::vector<ChartPoint>> Polylines(const std::string& fragment) {
  std::vector<std::vector<ChartPoint>> lines;
  const std::string points = " points=\"";
  for (size_t at = fragment.find("<polyline"); at != std::string::npos; at = fragment.find("<polyline", at + 1)) {
    const size_t tag_end = fragment.find('>', at);
    const size_t attr = fragment.find(points, at);
    if (attr == std::string::npos || attr > tag_end) continue;
    const size_t begin = attr + points.size();
    std::istringstream text(fragment.substr(begin, fragment.find('"', begin) - begin));
    std::vector<ChartPoint> pts;
    double x = 0, y = 0;
    char comma = 0;
    while (text >> x >> comma >> y) {
      EXPECT_EQ(comma, ',');
      pts.push_back({x, y});
    }
    lines.push_back(pts);
  }
  return lines;
}

int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(SvgChart, LinePointsMapBackToTheirValues) {
  LineChart c;
  c.id = "loss";
  c.title = "Loss";
  ChartSeries s{"train", "#123456", ChartSeries::Style::kLine, {}};
  for (int i = 1; i <= 50; ++i) s.points.push_back({static_cast<double>(i), 5.0 * std::exp(-0.05 * i) + 0.1 * (i % 3)});
  c.series.push_back(s);
  const std::string svg = RenderSvg(c);
  const Geometry g(svg);
  const std::string group = SeriesGroup(svg, "train");
  ASSERT_FALSE(group.empty()) << svg;
  EXPECT_NE(group.find("data-n=\"50\""), std::string::npos);
  const auto lines = Polylines(group);
  ASSERT_EQ(lines.size(), 1u);
  ASSERT_EQ(lines[0].size(), 50u);
  for (size_t i = 0; i < 50; ++i) {
    EXPECT_NEAR(g.X(lines[0][i].x), s.points[i].x, g.XTol()) << i;
    EXPECT_NEAR(g.Y(lines[0][i].y), s.points[i].y, g.YTol()) << i;
  }
  // The data fill the plot: the range covers every point, with a margin on y only.
  EXPECT_DOUBLE_EQ(g.xmin, 1);
  EXPECT_DOUBLE_EQ(g.xmax, 50);
  EXPECT_LT(g.ymin, 5.0 * std::exp(-2.5));
  EXPECT_GT(g.ymax, 5.0 * std::exp(-0.05) + 0.1);
}

TEST(SvgChart, NonFiniteValueBreaksTheLineAndDotsFollowThePoints) {
  LineChart c;
  c.id = "val";
  c.series.push_back({"a", "red", ChartSeries::Style::kLine, {{0, 1}, {1, 2}, {2, NAN}, {3, 4}, {4, 3}}});
  c.series.push_back({"b", "blue", ChartSeries::Style::kDashed, {{0, 2}, {4, 1}}});
  const std::string svg = RenderSvg(c);
  const Geometry g(svg);
  const auto a = Polylines(SeriesGroup(svg, "a"));
  ASSERT_EQ(a.size(), 2u);  // before and after the NaN
  EXPECT_EQ(a[0].size(), 2u);
  EXPECT_EQ(a[1].size(), 2u);
  EXPECT_NEAR(g.X(a[1][0].x), 3, g.XTol());
  EXPECT_NEAR(g.Y(a[1][0].y), 4, g.YTol());
  const std::string b = SeriesGroup(svg, "b");
  EXPECT_NE(b.find("stroke-dasharray"), std::string::npos);
  EXPECT_EQ(Count(b, "<circle"), 2);
  EXPECT_NE(SeriesGroup(svg, "a").find("data-n=\"4\""), std::string::npos);
}

TEST(SvgChart, MarkersTicksAndLimitSitWhereTheirValuesAre) {
  LineChart c;
  c.id = "m";
  c.series.push_back({"s", "red", ChartSeries::Style::kLine, {{0, 0}, {100, 10}}});
  c.markers.push_back({40, "restart 1", "#c0392b"});
  c.ticks = {25, 50, 75};
  c.ticks_label = "checkpoint";
  c.has_limit = true;
  c.limit = 12;
  c.limit_label = "limit";
  const std::string svg = RenderSvg(c);
  const Geometry g(svg);
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(svg, m, std::regex("<g class=\"marker\"><title>restart 1</title><line x1=\"([0-9.]+)\"")));
  EXPECT_NEAR(g.X(std::stod(m[1])), 40, g.XTol());
  ASSERT_TRUE(std::regex_search(svg, m, std::regex("class=\"limit\" x1=\"[0-9.]+\" y1=\"([0-9.]+)\"")));
  EXPECT_NEAR(g.Y(std::stod(m[1])), 12, g.YTol());
  EXPECT_GT(g.ymax, 12);  // the limit is inside the plot
  EXPECT_NE(svg.find("<g class=\"ticks\" data-n=\"3\">"), std::string::npos);
}

TEST(SvgChart, ManyPointsAreThinnedButKeepTheirSpike) {
  LineChart c;
  c.id = "long";
  ChartSeries s{"s", "red", ChartSeries::Style::kLine, {}};
  for (int i = 0; i < 20000; ++i) s.points.push_back({static_cast<double>(i), i == 12345 ? 100.0 : 1.0});
  c.series.push_back(s);
  const std::string svg = RenderSvg(c);
  const Geometry g(svg);
  const auto lines = Polylines(SeriesGroup(svg, "s"));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_LT(lines[0].size(), 2000u);
  double highest = 0;
  for (const ChartPoint& p : lines[0]) highest = std::max(highest, g.Y(p.y));
  EXPECT_NEAR(highest, 100, g.YTol());
}

TEST(SvgChart, StackedLayersAddUpAndBarsHaveTheirValues) {
  StackedChart st;
  st.id = "split";
  st.x = {1, 2, 3};
  st.layer_names = {"compute", "wait"};
  st.layer_colors = {"blue", "orange"};
  st.layers = {{10, 20, 30}, {5, 5, 5}};
  const std::string svg = RenderSvg(st);
  const Geometry g(svg);
  EXPECT_EQ(Count(svg, "<path class=\"area\""), 2);
  std::smatch m;
  // The top layer's first vertex is at compute + wait of the first column.
  ASSERT_TRUE(std::regex_search(svg, m, std::regex("data-series=\"wait\" data-n=\"3\" d=\"M([0-9.]+),([0-9.]+)")));
  EXPECT_NEAR(g.X(std::stod(m[1])), 1, g.XTol());
  EXPECT_NEAR(g.Y(std::stod(m[2])), 15, g.YTol());

  BarChart b;
  b.id = "memory";
  b.groups = {"rank 0", "rank 1"};
  b.bar_names = {"params", "peak"};
  b.bar_colors = {"blue", "gray"};
  b.values = {{100, 50}, {400, 300}};
  const std::string bars = RenderSvg(b);
  const Geometry gb(bars);
  const std::regex rect(
      "data-series=\"([a-z]+)\" data-group=\"rank ([01])\" data-value=\"([0-9.]+)\" x=\"[0-9.]+\" y=\"([0-9.]+)\"");
  int n = 0;
  for (auto it = std::sregex_iterator(bars.begin(), bars.end(), rect); it != std::sregex_iterator(); ++it, ++n) {
    const int bar = (*it)[1] == "params" ? 0 : 1, group = std::stoi((*it)[2]);
    EXPECT_EQ(std::stod((*it)[3]), b.values[bar][group]);
    EXPECT_NEAR(gb.Y(std::stod((*it)[4])), b.values[bar][group], gb.YTol());
  }
  EXPECT_EQ(n, 4);
}

TEST(SvgChart, TextIsEscapedAndAnEmptyChartSaysSo) {
  LineChart c;
  c.id = "x";
  c.title = "a<b & \"c\"";
  c.series.push_back({"<script>", "red", ChartSeries::Style::kLine, {}});
  const std::string svg = RenderSvg(c);
  EXPECT_EQ(svg.find("<script>"), std::string::npos);
  EXPECT_NE(svg.find("a&lt;b &amp; &quot;c&quot;"), std::string::npos);
  EXPECT_NE(svg.find("no data"), std::string::npos);
  EXPECT_EQ(FormatAxisNumber(25000), "25k");
  EXPECT_EQ(FormatAxisNumber(1500), "1500");
  EXPECT_EQ(FormatAxisNumber(0.0005), "0.0005");
}

// A two-rank run as the trainer writes it, restarted once, with a torn last line.
const char* kMetrics =
    R"({"event":"start","step":0,"version":"9.9.9","config":"configs/x.toml","overrides":["optim.lr=0.1"],"model":"gpt","parameters":1000,"layout":"dp=2,tp=1,pp=1","zero":0,"backend":"threads","world":2,"threads":1,"mem_limit":1000000,"total_steps":4,"unit":"tokens","processor":"Test CPU, 2 cores","host":"h"}
{"step":1,"loss":5.0,"lr":0.1,"grad_norm":2.0,"tokens_per_s":1000,"step_ms":10,"data_ms":1,"compute_ms":6,"optim_ms":1,"exposed_comm_ms":1,"wait_ms":0.5,"rank_compute_ms":[6,7],"rank_wait_ms":[1,0]}
{"step":2,"loss":4.0,"lr":0.1,"grad_norm":1.5,"tokens_per_s":1000,"step_ms":10,"data_ms":1,"compute_ms":6,"optim_ms":1,"exposed_comm_ms":1,"wait_ms":0.5,"rank_compute_ms":[6,7],"rank_wait_ms":[1,0]}
{"event":"checkpoint","step":2,"stall_ms":3}
{"event":"restart","attempt":1,"cause":"worker killed"}
{"event":"start","step":2,"version":"9.9.9","config":"configs/x.toml","model":"gpt","parameters":1000,"layout":"dp=2,tp=1,pp=1","zero":0,"backend":"threads","world":2,"threads":1,"mem_limit":1000000,"total_steps":4,"unit":"tokens","processor":"Test CPU, 2 cores","host":"h"}
{"event":"resume","step":2,"checkpoint":"c"}
{"step":3,"skipped":"nonfinite_grad"}
{"step":3,"val_loss":3.9}
{"event":"straggler","step":3,"rank":1,"host":"h","ratio":2.0}
{"step":4,"loss":3.0,"lr":0.05,"grad_norm":1.0,"tokens_per_s":1000,"step_ms":10,"rank_compute_ms":[6,7],"rank_wait_ms":[1,0]}
{"event":"memory","rank":0,"params_bytes":4000,"grads_bytes":4000,"optimizer_bytes":8000,"peak_activation_bytes":9000,"peak_bytes":30000}
{"event":"memory","rank":1,"params_bytes":4000,"grads_bytes":4000,"optimizer_bytes":8000,"peak_activation_bytes":9000,"peak_bytes":31000}
{"step":5,"loss":2.)";

TEST(RunReport, ReadsARunWithATornLineAndDrawsItsSeriesAndEvents) {
  char dir[] = "/tmp/lockstep-report-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::ofstream(std::string(dir) + "/metrics.jsonl") << kMetrics;
  Result<RunMetrics> run = ReadRunMetrics(dir);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->torn_lines, 1);
  EXPECT_EQ(run->train.size(), 3u);
  EXPECT_EQ(run->starts.size(), 2u);
  EXPECT_FALSE(run->finished());
  ASSERT_EQ(run->Events("restart").size(), 1u);
  EXPECT_EQ(run->Events("restart")[0]["after_step"], 2);

  ReportSummary summary;
  const std::string html = RenderRunReport({*run}, &summary);
  EXPECT_EQ(summary.charts, 9);
  EXPECT_EQ(summary.torn_lines, 1);
  EXPECT_EQ(Count(html, "<svg "), 9);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));  // no other address
  EXPECT_EQ(html.find("src="), std::string::npos);                           // nothing loaded
  for (const char* text : {"9.9.9", "dp=2,tp=1,pp=1", "Test CPU, 2 cores", "1 torn line(s) ignored", "restart 1",
                           "resume @2", "straggler rank 1", "skipped", "--mem-limit 1M"})
    EXPECT_NE(html.find(text), std::string::npos) << text;
  // The loss chart: the three training steps, the one validation point.
  const size_t loss = html.find("data-chart=\"loss\"");
  const std::string loss_svg = html.substr(loss, html.find("</svg>", loss) - loss);
  EXPECT_NE(SeriesGroup(loss_svg, "train").find("data-n=\"3\""), std::string::npos);
  EXPECT_NE(SeriesGroup(loss_svg, "validation").find("data-n=\"1\""), std::string::npos);
  // One series per rank in the per-rank charts, one bar per rank and kind in the memory chart.
  const size_t ranks = html.find("data-chart=\"rank_compute\"");
  const std::string ranks_svg = html.substr(ranks, html.find("</svg>", ranks) - ranks);
  EXPECT_NE(SeriesGroup(ranks_svg, "rank 1").find("data-n=\"3\""), std::string::npos);
  EXPECT_EQ(Count(html, "<rect class=\"bar\""), 10);
  std::remove((std::string(dir) + "/metrics.jsonl").c_str());
  std::remove(dir);
}

TEST(RunReport, ADirectoryWithoutMetricsIsNotARun) {
  Result<RunMetrics> run = ReadRunMetrics("/nonexistent-run-dir");
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("is not a run directory"), std::string::npos);
}

}  // namespace
}  // namespace lockstep::report
