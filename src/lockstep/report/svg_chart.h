// Charts as inline SVG text, drawn by lockstep itself so a report needs no chart library, no
// script and no network: line charts (several series, vertical event markers, axis ticks,
// a horizontal limit), stacked areas and grouped bars.
//
// Every <svg> carries its plot geometry as data attributes (data-chart, data-xmin/xmax/ymin/
// ymax for the value ranges, data-left/right/top/bottom for the plot area in pixels) and every
// drawn series its name and point count (data-series, data-n), so a test can map the drawn
// coordinates back to the values they came from.
#pragma once

#include <string>
#include <vector>

namespace lockstep::report {

struct ChartPoint {
  double x = 0, y = 0;
};

struct ChartSeries {
  enum class Style { kLine, kDashed, kDots };  // kDashed: line and a dot per point
  std::string name;                            // legend text
  std::string color;                           // CSS color
  Style style = Style::kLine;
  std::vector<ChartPoint> points;  // in x order; a non-finite y breaks the line
};

struct ChartMarker {
  double x = 0;
  std::string label;  // shown beside the line, and as its tooltip
  std::string color;
};

struct LineChart {
  std::string id;  // data-chart: a stable name ("loss", "lr", ...)
  std::string title, x_label, y_label;
  std::vector<ChartSeries> series;
  std::vector<ChartMarker> markers;  // vertical lines across the plot (restarts, stragglers)
  std::vector<double> ticks;         // short marks under the x axis (checkpoints)
  std::string ticks_label;           // legend text of the ticks
  bool has_limit = false;            // a horizontal dashed line at y = limit
  double limit = 0;
  std::string limit_label;
  bool y_from_zero = false;  // the y axis starts at 0 (otherwise at the data's minimum)
};

struct StackedChart {
  std::string id, title, x_label, y_label;
  std::vector<double> x;                    // one per column
  std::vector<std::string> layer_names;     // bottom to top
  std::vector<std::string> layer_colors;    // one per layer
  std::vector<std::vector<double>> layers;  // layers[l][i]: layer l's height at x[i] (>= 0)
};

struct BarChart {
  std::string id, title, y_label;
  std::vector<std::string> groups;     // along x (the ranks)
  std::vector<std::string> bar_names;  // bars within a group
  std::vector<std::string> bar_colors;
  std::vector<std::vector<double>> values;  // values[bar][group]
  bool has_limit = false;
  double limit = 0;
  std::string limit_label;
};

// Each returns one <svg> element. A chart without any finite point says so in its plot area
// (and draws nothing). Series with more points than 4 per pixel column are thinned to the
// minimum and maximum of each column, which keeps every spike visible.
std::string RenderSvg(const LineChart& chart);
std::string RenderSvg(const StackedChart& chart);
std::string RenderSvg(const BarChart& chart);

// A readable number for axis labels: up to 3 significant digits, k/M/G for large values.
std::string FormatAxisNumber(double v);

// Text for HTML and SVG: & < > " ' escaped.
std::string EscapeXml(const std::string& text);

}  // namespace lockstep::report
