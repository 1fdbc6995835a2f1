#include "lockstep/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace lockstep::report {
namespace {

constexpr double kWidth = 600, kHeight = 290;
constexpr double kLeft = 64, kRight = 18, kBottom = 44;
constexpr double kTitleBaseline = 16, kLegendRow = 14;

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

std::string Attr(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

// The plot area and the value ranges mapped onto it.
struct Frame {
  double left = kLeft, right = kWidth - kRight, top = 0, bottom = kHeight - kBottom;
  double xmin = 0, xmax = 1, ymin = 0, ymax = 1;
  double X(double x) const { return left + (x - xmin) / (xmax - xmin) * (right - left); }
  double Y(double y) const { return bottom - (y - ymin) / (ymax - ymin) * (bottom - top); }
};

// Ticks at 1, 2 or 5 times a power of ten, about `count` of them inside [lo, hi].
std::vector<double> NiceTicks(double lo, double hi, int count) {
  const double raw = (hi - lo) / count;
  if (!(raw > 0) || !std::isfinite(raw)) return {lo};
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * power) {
      step = m * power;
      break;
    }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step)
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

struct LegendItem {
  std::string name, color;
  bool dashed = false;
};

// The legend's rows under the title: how many, and the SVG that draws them from `top`.
std::string Legend(const std::vector<LegendItem>& items, double* rows_height) {
  std::string svg;
  double x = kLeft, y = kTitleBaseline + kLegendRow;
  int rows = items.empty() ? 0 : 1;
  for (const LegendItem& it : items) {
    const double w = 22 + 6.2 * static_cast<double>(it.name.size()) + 14;
    if (x + w > kWidth - kRight && x > kLeft) {
      x = kLeft;
      y += kLegendRow;
      ++rows;
    }
    svg += "<line x1=\"" + Num(x) + "\" y1=\"" + Num(y - 4) + "\" x2=\"" + Num(x + 16) + "\" y2=\"" + Num(y - 4) +
           "\" stroke=\"" + it.color + "\" stroke-width=\"2.5\"" + (it.dashed ? " stroke-dasharray=\"5,3\"" : "") +
           "/><text x=\"" + Num(x + 20) + "\" y=\"" + Num(y) + "\" class=\"legend\">" + EscapeXml(it.name) + "</text>";
    x += w;
  }
  *rows_height = rows * kLegendRow;
  return svg;
}

std::string Open(const std::string& id, const std::string& title, const Frame& f) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"" + Num(kWidth) + "\" height=\"" +
         Num(kHeight) + "\" viewBox=\"0 0 " + Num(kWidth) + " " + Num(kHeight) + "\" data-chart=\"" + EscapeXml(id) +
         "\" data-xmin=\"" + Attr(f.xmin) + "\" data-xmax=\"" + Attr(f.xmax) + "\" data-ymin=\"" + Attr(f.ymin) +
         "\" data-ymax=\"" + Attr(f.ymax) + "\" data-left=\"" + Attr(f.left) + "\" data-right=\"" + Attr(f.right) +
         "\" data-top=\"" + Attr(f.top) + "\" data-bottom=\"" + Attr(f.bottom) + "\"><text x=\"" + Num(kLeft) +
         "\" y=\"" + Num(kTitleBaseline) + "\" class=\"title\">" + EscapeXml(title) + "</text>";
}

// Grid lines, tick labels and axis titles; `x_ticks` false for the bar chart (it labels groups).
std::string Axes(const Frame& f, const std::string& x_label, const std::string& y_label, bool x_ticks) {
  std::string svg = "<g class=\"axes\">";
  for (double t : NiceTicks(f.ymin, f.ymax, 5)) {
    const double y = f.Y(t);
    svg += "<line class=\"grid\" x1=\"" + Num(f.left) + "\" y1=\"" + Num(y) + "\" x2=\"" + Num(f.right) + "\" y2=\"" +
           Num(y) + "\"/><text x=\"" + Num(f.left - 6) + "\" y=\"" + Num(y + 4) + "\" text-anchor=\"end\">" +
           FormatAxisNumber(t) + "</text>";
  }
  if (x_ticks) {
    for (double t : NiceTicks(f.xmin, f.xmax, 6)) {
      const double x = f.X(t);
      svg += "<line class=\"grid\" x1=\"" + Num(x) + "\" y1=\"" + Num(f.top) + "\" x2=\"" + Num(x) + "\" y2=\"" +
             Num(f.bottom) + "\"/><text x=\"" + Num(x) + "\" y=\"" + Num(f.bottom + 16) + "\" text-anchor=\"middle\">" +
             FormatAxisNumber(t) + "</text>";
    }
  }
  svg += "<rect class=\"frame\" x=\"" + Num(f.left) + "\" y=\"" + Num(f.top) + "\" width=\"" + Num(f.right - f.left) +
         "\" height=\"" + Num(f.bottom - f.top) + "\"/>";
  svg += "<text x=\"" + Num((f.left + f.right) / 2) + "\" y=\"" + Num(kHeight - 8) + "\" text-anchor=\"middle\">" +
         EscapeXml(x_label) + "</text>";
  svg += "<text transform=\"translate(14," + Num((f.top + f.bottom) / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
         EscapeXml(y_label) + "</text></g>";
  return svg;
}

std::string NoData(const Frame& f) {
  return "<text x=\"" + Num((f.left + f.right) / 2) + "\" y=\"" + Num((f.top + f.bottom) / 2) +
         "\" text-anchor=\"middle\" class=\"nodata\">no data</text></svg>";
}

std::string Limit(const Frame& f, double limit, const std::string& label) {
  const double y = f.Y(limit);
  return "<line class=\"limit\" x1=\"" + Num(f.left) + "\" y1=\"" + Num(y) + "\" x2=\"" + Num(f.right) + "\" y2=\"" +
         Num(y) + "\" stroke=\"#c0392b\" stroke-dasharray=\"6,4\"><title>" + EscapeXml(label) +
         "</title></line><text x=\"" + Num(f.right - 4) + "\" y=\"" + Num(y - 4) +
         "\" text-anchor=\"end\" fill=\"#c0392b\">" + EscapeXml(label) + "</text>";
}

// Points thinned to the lowest and highest of each pixel column when there are many more
// points than columns; a non-finite y is kept (it breaks the line).
std::vector<ChartPoint> Thin(const std::vector<ChartPoint>& points, const Frame& f) {
  const double columns = f.right - f.left;
  if (static_cast<double>(points.size()) <= 4 * columns) return points;
  std::vector<ChartPoint> out;
  size_t i = 0;
  while (i < points.size()) {
    const int column = static_cast<int>(f.X(points[i].x));
    size_t lo = i, hi = i, j = i;
    for (; j < points.size() && static_cast<int>(f.X(points[j].x)) == column; ++j) {
      if (!std::isfinite(points[j].y)) continue;
      if (!std::isfinite(points[lo].y) || points[j].y < points[lo].y) lo = j;
      if (!std::isfinite(points[hi].y) || points[j].y > points[hi].y) hi = j;
    }
    out.push_back(points[std::min(lo, hi)]);
    if (lo != hi) out.push_back(points[std::max(lo, hi)]);
    i = j;
  }
  return out;
}

std::string DrawSeries(const ChartSeries& s, const Frame& f) {
  const std::vector<ChartPoint> points = Thin(s.points, f);
  size_t finite = 0;
  for (const ChartPoint& p : points) finite += std::isfinite(p.y) && std::isfinite(p.x);
  std::string svg = "<g class=\"series\" data-series=\"" + EscapeXml(s.name) + "\" data-n=\"" + std::to_string(finite) +
                    "\"><title>" + EscapeXml(s.name) + "</title>";
  const std::string dash = s.style == ChartSeries::Style::kDashed ? " stroke-dasharray=\"5,3\"" : "";
  if (s.style != ChartSeries::Style::kDots) {
    std::string line;
    size_t in_line = 0;
    auto flush = [&] {
      if (in_line > 0)
        svg += "<polyline fill=\"none\" stroke=\"" + s.color + "\" stroke-width=\"1.6\"" + dash + " points=\"" + line +
               "\"/>";
      line.clear();
      in_line = 0;
    };
    for (const ChartPoint& p : points) {
      if (!std::isfinite(p.y) || !std::isfinite(p.x)) {
        flush();
        continue;
      }
      if (in_line++ > 0) line += ' ';
      line += Num(f.X(p.x)) + "," + Num(f.Y(p.y));
    }
    flush();
  }
  if (s.style != ChartSeries::Style::kLine) {
    for (const ChartPoint& p : points)
      if (std::isfinite(p.y) && std::isfinite(p.x))
        svg += "<circle cx=\"" + Num(f.X(p.x)) + "\" cy=\"" + Num(f.Y(p.y)) + "\" r=\"2.8\" fill=\"" + s.color + "\"/>";
  }
  return svg + "</g>";
}

void Include(double v, double* lo, double* hi) {
  if (!std::isfinite(v)) return;
  *lo = std::min(*lo, v);
  *hi = std::max(*hi, v);
}

// Pads a value range so that its data does not touch the frame, and widens an empty one.
void Pad(double* lo, double* hi, bool from_zero) {
  if (*hi - *lo <= 0) {
    const double d = *lo == 0 ? 1 : std::fabs(*lo) * 0.1;
    *lo -= d;
    *hi += d;
  }
  const double pad = (*hi - *lo) * 0.05;
  *hi += pad;
  *lo = from_zero && *lo >= 0 ? 0 : *lo - pad;
}

}  // namespace

std::string EscapeXml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string FormatAxisNumber(double v) {
  char buf[32];
  const double a = std::fabs(v);
  if (a >= 1e9)
    std::snprintf(buf, sizeof(buf), "%gG", v / 1e9);
  else if (a >= 1e6)
    std::snprintf(buf, sizeof(buf), "%gM", v / 1e6);
  else if (a >= 1e4)
    std::snprintf(buf, sizeof(buf), "%gk", v / 1e3);
  else if (a >= 1e3)
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  else
    std::snprintf(buf, sizeof(buf), "%.3g", v);
  return buf;
}

std::string RenderSvg(const LineChart& c) {
  std::vector<LegendItem> legend;
  for (const ChartSeries& s : c.series) legend.push_back({s.name, s.color, s.style == ChartSeries::Style::kDashed});
  if (!c.ticks.empty()) legend.push_back({c.ticks_label, "#16a085", false});
  double legend_height = 0;
  const std::string legend_svg = Legend(legend, &legend_height);
  Frame f;
  f.top = kTitleBaseline + legend_height + 10;
  double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo, ylo = xlo, yhi = -xlo;
  for (const ChartSeries& s : c.series)
    for (const ChartPoint& p : s.points) {
      if (!std::isfinite(p.y)) continue;
      Include(p.x, &xlo, &xhi);
      Include(p.y, &ylo, &yhi);
    }
  const bool empty = !std::isfinite(xlo);
  for (const ChartMarker& m : c.markers) Include(m.x, &xlo, &xhi);
  for (double t : c.ticks) Include(t, &xlo, &xhi);
  if (c.has_limit) Include(c.limit, &ylo, &yhi);
  if (!std::isfinite(xlo)) xlo = xhi = 0;
  if (!std::isfinite(ylo)) ylo = yhi = 0;
  if (xhi <= xlo) {
    xlo -= 1;
    xhi += 1;
  }
  Pad(&ylo, &yhi, c.y_from_zero);
  f.xmin = xlo;
  f.xmax = xhi;
  f.ymin = ylo;
  f.ymax = yhi;
  std::string svg = Open(c.id, c.title, f) + legend_svg + Axes(f, c.x_label, c.y_label, true);
  if (empty) return svg + NoData(f);
  if (c.has_limit) svg += Limit(f, c.limit, c.limit_label);
  for (const ChartMarker& m : c.markers) {
    const double x = f.X(m.x);
    svg += "<g class=\"marker\"><title>" + EscapeXml(m.label) + "</title><line x1=\"" + Num(x) + "\" y1=\"" +
           Num(f.top) + "\" x2=\"" + Num(x) + "\" y2=\"" + Num(f.bottom) + "\" stroke=\"" + m.color +
           "\" stroke-width=\"1.2\" stroke-dasharray=\"3,3\"/><text transform=\"translate(" + Num(x + 3) + "," +
           Num(f.top + 4) + ") rotate(90)\" fill=\"" + m.color + "\" class=\"marker-label\">" + EscapeXml(m.label) +
           "</text></g>";
  }
  for (const ChartSeries& s : c.series) svg += DrawSeries(s, f);
  if (!c.ticks.empty()) {
    svg += "<g class=\"ticks\" data-n=\"" + std::to_string(c.ticks.size()) + "\"><title>" + EscapeXml(c.ticks_label) +
           "</title>";
    for (double t : c.ticks)
      svg += "<path d=\"M" + Num(f.X(t)) + "," + Num(f.bottom - 9) + " l-4,9 h8 Z\" fill=\"#16a085\"/>";
    svg += "</g>";
  }
  return svg + "</svg>";
}

std::string RenderSvg(const StackedChart& c) {
  std::vector<LegendItem> legend;
  for (size_t l = 0; l < c.layer_names.size(); ++l) legend.push_back({c.layer_names[l], c.layer_colors[l], false});
  double legend_height = 0;
  const std::string legend_svg = Legend(legend, &legend_height);
  Frame f;
  f.top = kTitleBaseline + legend_height + 10;
  // Columns averaged down to at most one per pixel.
  const size_t n = c.x.size();
  const size_t columns = static_cast<size_t>(f.right - f.left);
  const size_t group = std::max<size_t>(1, (n + columns - 1) / std::max<size_t>(1, columns));
  std::vector<double> xs;
  std::vector<std::vector<double>> tops(c.layers.size());
  for (size_t i = 0; i < n; i += group) {
    const size_t end = std::min(n, i + group);
    double x = 0, below = 0;
    for (size_t k = i; k < end; ++k) x += c.x[k];
    xs.push_back(x / static_cast<double>(end - i));
    for (size_t l = 0; l < c.layers.size(); ++l) {
      double h = 0;
      for (size_t k = i; k < end; ++k) h += std::isfinite(c.layers[l][k]) ? std::max(0.0, c.layers[l][k]) : 0.0;
      below += h / static_cast<double>(end - i);
      tops[l].push_back(below);
    }
  }
  double ymax = 0;
  if (!tops.empty())
    for (double t : tops.back()) ymax = std::max(ymax, t);
  f.xmin = xs.empty() ? 0 : xs.front();
  f.xmax = xs.empty() ? 1 : xs.back();
  if (f.xmax <= f.xmin) {
    f.xmin -= 1;
    f.xmax += 1;
  }
  f.ymin = 0;
  f.ymax = ymax > 0 ? ymax * 1.05 : 1;
  std::string svg = Open(c.id, c.title, f) + legend_svg + Axes(f, c.x_label, c.y_label, true);
  if (xs.empty()) return svg + NoData(f);
  for (size_t l = 0; l < tops.size(); ++l) {
    std::string d;
    for (size_t i = 0; i < xs.size(); ++i) d += (i == 0 ? "M" : " L") + Num(f.X(xs[i])) + "," + Num(f.Y(tops[l][i]));
    for (size_t i = xs.size(); i-- > 0;) d += " L" + Num(f.X(xs[i])) + "," + Num(f.Y(l == 0 ? 0.0 : tops[l - 1][i]));
    svg += "<path class=\"area\" data-series=\"" + EscapeXml(c.layer_names[l]) + "\" data-n=\"" +
           std::to_string(xs.size()) + "\" d=\"" + d + " Z\" fill=\"" + c.layer_colors[l] +
           "\" fill-opacity=\"0.85\"><title>" + EscapeXml(c.layer_names[l]) + "</title></path>";
  }
  return svg + "</svg>";
}

std::string RenderSvg(const BarChart& c) {
  std::vector<LegendItem> legend;
  for (size_t b = 0; b < c.bar_names.size(); ++b) legend.push_back({c.bar_names[b], c.bar_colors[b], false});
  double legend_height = 0;
  const std::string legend_svg = Legend(legend, &legend_height);
  Frame f;
  f.top = kTitleBaseline + legend_height + 10;
  double ymax = c.has_limit ? c.limit : 0;
  for (const std::vector<double>& bar : c.values)
    for (double v : bar)
      if (std::isfinite(v)) ymax = std::max(ymax, v);
  f.xmin = 0;
  f.xmax = std::max<double>(1, static_cast<double>(c.groups.size()));
  f.ymin = 0;
  f.ymax = ymax > 0 ? ymax * 1.08 : 1;
  std::string svg = Open(c.id, c.title, f) + legend_svg + Axes(f, "", c.y_label, false);
  if (c.groups.empty() || c.values.empty()) return svg + NoData(f);
  const double group_w = (f.right - f.left) / static_cast<double>(c.groups.size());
  const double bar_w = group_w * 0.8 / static_cast<double>(c.values.size());
  for (size_t g = 0; g < c.groups.size(); ++g) {
    const double x0 = f.left + group_w * static_cast<double>(g) + group_w * 0.1;
    svg += "<text x=\"" + Num(x0 + group_w * 0.4) + "\" y=\"" + Num(f.bottom + 16) + "\" text-anchor=\"middle\">" +
           EscapeXml(c.groups[g]) + "</text>";
    for (size_t b = 0; b < c.values.size(); ++b) {
      const double v = g < c.values[b].size() && std::isfinite(c.values[b][g]) ? std::max(0.0, c.values[b][g]) : 0.0;
      const double y = f.Y(v);
      svg += "<rect class=\"bar\" data-series=\"" + EscapeXml(c.bar_names[b]) + "\" data-group=\"" +
             EscapeXml(c.groups[g]) + "\" data-value=\"" + Attr(v) + "\" x=\"" +
             Num(x0 + bar_w * static_cast<double>(b)) + "\" y=\"" + Num(y) + "\" width=\"" + Num(bar_w * 0.92) +
             "\" height=\"" + Num(f.bottom - y) + "\" fill=\"" + c.bar_colors[b] + "\"><title>" +
             EscapeXml(c.bar_names[b] + " " + c.groups[g] + ": " + FormatAxisNumber(v)) + "</title></rect>";
    }
  }
  if (c.has_limit) svg += Limit(f, c.limit, c.limit_label);
  return svg + "</svg>";
}

}  // namespace lockstep::report
