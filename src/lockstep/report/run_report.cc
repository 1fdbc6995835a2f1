#include "lockstep/report/run_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "lockstep/core/version.h"
#include "lockstep/report/svg_chart.h"

namespace lockstep::report {
namespace {

const char* const kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};
std::string Color(size_t i) { return kPalette[i % (sizeof(kPalette) / sizeof(kPalette[0]))]; }

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A row's number, NaN when absent or not a number (rows of an older or foreign run).
double Get(const nlohmann::json& row, const char* key) {
  auto it = row.find(key);
  return it != row.end() && it->is_number() ? it->get<double>() : kNaN;
}

std::string Text(const nlohmann::json& row, const char* key) {
  auto it = row.find(key);
  if (it == row.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

// The run's label in legends: its directory name, unless there is only one run.
std::string Prefix(const RunMetrics& run, size_t runs) { return runs > 1 ? run.name + " " : ""; }

std::vector<ChartPoint> Points(const std::vector<nlohmann::json>& rows, const char* y_key, double x_scale = 1.0) {
  std::vector<ChartPoint> p;
  for (const nlohmann::json& r : rows) {
    const double x = Get(r, "step");
    if (std::isfinite(x)) p.push_back({x * x_scale, Get(r, y_key)});
  }
  return p;
}

bool IsText(const RunMetrics& run) {
  const std::string unit = Text(run.start(), "unit");
  if (!unit.empty()) return unit == "tokens";
  return run.train.empty() || !run.train.front().contains("samples_per_s");
}

// Tokens (or samples) one step consumes: throughput x step time, the same every step.
double UnitsPerStep(const RunMetrics& run) {
  const char* key = IsText(run) ? "tokens_per_s" : "samples_per_s";
  for (const nlohmann::json& r : run.train) {
    const double rate = Get(r, key), ms = Get(r, "step_ms");
    if (std::isfinite(rate) && std::isfinite(ms) && rate > 0) return std::round(rate * ms * 1e-3);
  }
  return kNaN;
}

// Restarts (after the step they followed), resumes, skipped steps and stragglers.
std::vector<ChartMarker> Markers(const RunMetrics& run, size_t runs, bool with_skipped) {
  std::vector<ChartMarker> m;
  const std::string who = runs > 1 ? run.name + ": " : "";
  for (const nlohmann::json& e : run.Events("restart"))
    m.push_back({Get(e, "after_step"), who + "restart " + Text(e, "attempt"), "#c0392b"});
  for (const nlohmann::json& e : run.Events("resume"))
    m.push_back({Get(e, "step"), who + "resume @" + Text(e, "step"), "#8e44ad"});
  for (const nlohmann::json& e : run.Events("straggler"))
    m.push_back({Get(e, "step"), who + "straggler rank " + Text(e, "rank"), "#d35400"});
  if (with_skipped)
    for (const nlohmann::json& s : run.skipped) m.push_back({Get(s, "step"), who + "skipped", "#e74c3c"});
  return m;
}

std::vector<double> CheckpointSteps(const std::vector<RunMetrics>& runs) {
  std::vector<double> t;
  for (const RunMetrics& run : runs)
    for (const nlohmann::json& e : run.Events("checkpoint")) t.push_back(Get(e, "step"));
  return t;
}

// A chart of one key of the training rows, every run overlaid.
LineChart Overlay(const std::vector<RunMetrics>& runs, const char* id, const char* title, const char* key,
                  const char* y_label, bool markers, bool skipped) {
  LineChart c;
  c.id = id;
  c.title = title;
  c.x_label = "step";
  c.y_label = y_label;
  for (size_t i = 0; i < runs.size(); ++i) {
    c.series.push_back(
        {runs.size() > 1 ? runs[i].name : key, Color(i), ChartSeries::Style::kLine, Points(runs[i].train, key)});
    if (!markers) continue;
    for (const ChartMarker& m : Markers(runs[i], runs.size(), skipped)) c.markers.push_back(m);
  }
  if (markers) {
    c.ticks = CheckpointSteps(runs);
    c.ticks_label = "checkpoint";
  }
  return c;
}

LineChart Loss(const std::vector<RunMetrics>& runs, bool by_units) {
  LineChart c;
  const bool text = runs.empty() || IsText(runs[0]);
  c.id = by_units ? "loss_by_units" : "loss";
  c.title = by_units ? std::string("Loss against ") + (text ? "tokens" : "samples") + " seen" : "Loss";
  c.x_label = by_units ? (text ? "tokens seen" : "samples seen") : "step";
  c.y_label = "loss";
  for (size_t i = 0; i < runs.size(); ++i) {
    const double scale = by_units ? UnitsPerStep(runs[i]) : 1.0;
    const std::string p = Prefix(runs[i], runs.size());
    c.series.push_back({p + "train", Color(i), ChartSeries::Style::kLine, Points(runs[i].train, "loss", scale)});
    c.series.push_back(
        {p + "validation", Color(i), ChartSeries::Style::kDashed, Points(runs[i].val, "val_loss", scale)});
    if (by_units) continue;
    for (const ChartMarker& m : Markers(runs[i], runs.size(), true)) c.markers.push_back(m);
  }
  if (!by_units) {
    c.ticks = CheckpointSteps(runs);
    c.ticks_label = "checkpoint";
  }
  return c;
}

// Every rank's compute (or wait) time per step, from the rows' per-rank arrays.
LineChart PerRank(const std::vector<RunMetrics>& runs, const char* id, const char* title, const char* key) {
  LineChart c;
  c.id = id;
  c.title = title;
  c.x_label = "step";
  c.y_label = "ms";
  c.y_from_zero = true;
  size_t color = 0;
  for (const RunMetrics& run : runs) {
    size_t ranks = 0;
    for (const nlohmann::json& r : run.train)
      if (r.contains(key) && r[key].is_array()) ranks = std::max(ranks, r[key].size());
    for (size_t rank = 0; rank < ranks; ++rank) {
      ChartSeries s{
          Prefix(run, runs.size()) + "rank " + std::to_string(rank), Color(color++), ChartSeries::Style::kLine, {}};
      for (const nlohmann::json& r : run.train) {
        const auto& a = r[key];
        if (a.is_array() && rank < a.size() && a[rank].is_number())
          s.points.push_back({Get(r, "step"), a[rank].get<double>()});
      }
      c.series.push_back(std::move(s));
    }
    for (const ChartMarker& m : Markers(run, runs.size(), false)) c.markers.push_back(m);
  }
  return c;
}

StackedChart StepSplit(const RunMetrics& run, size_t runs) {
  StackedChart c;
  c.id = "step_split";
  c.title = "Step time split" + std::string(runs > 1 ? " (" + run.name + ")" : "");
  c.x_label = "step";
  c.y_label = "ms";
  c.layer_names = {"data",
                   "compute",
                   "pipeline bubble",
                   "exposed communication",
                   "waiting for slowest rank",
                   "optimizer",
                   "checkpoint stall",
                   "other"};
  c.layer_colors = {"#95a5a6", "#2e86c1", "#aed6f1", "#e67e22", "#f4d03f", "#27ae60", "#8e44ad", "#d5d8dc"};
  c.layers.assign(c.layer_names.size(), {});
  std::map<double, double> stall;
  for (const nlohmann::json& e : run.Events("checkpoint")) stall[Get(e, "step")] += std::max(0.0, Get(e, "stall_ms"));
  auto z = [](double v) { return std::isfinite(v) ? std::max(0.0, v) : 0.0; };
  for (const nlohmann::json& r : run.train) {
    const double step = Get(r, "step");
    if (!std::isfinite(step)) continue;
    const double compute = z(Get(r, "compute_ms")), bubble = z(Get(r, "pp_bubble")) * compute;
    const double parts[] = {z(Get(r, "data_ms")),         compute - bubble,     bubble,
                            z(Get(r, "exposed_comm_ms")), z(Get(r, "wait_ms")), z(Get(r, "optim_ms"))};
    double known = 0;
    for (size_t l = 0; l < 6; ++l) {
      c.layers[l].push_back(parts[l]);
      known += parts[l];
    }
    c.layers[6].push_back(stall.count(step) ? stall[step] : 0.0);
    c.layers[7].push_back(z(Get(r, "step_ms") - known));
    c.x.push_back(step);
  }
  return c;
}

// The newest memory row of each rank (the run's final ones).
BarChart Memory(const RunMetrics& run, size_t runs) {
  BarChart c;
  c.id = "memory";
  c.title = "Memory per rank" + std::string(runs > 1 ? " (" + run.name + ")" : "");
  c.y_label = "bytes";
  c.bar_names = {"parameters", "gradients", "optimizer", "peak activations", "peak total"};
  c.bar_colors = {"#2e86c1", "#e67e22", "#27ae60", "#f4d03f", "#7f8c8d"};
  const char* keys[] = {"params_bytes", "grads_bytes", "optimizer_bytes", "peak_activation_bytes", "peak_bytes"};
  std::map<int, nlohmann::json> newest;
  for (const nlohmann::json& e : run.Events("memory")) newest[static_cast<int>(Get(e, "rank"))] = e;
  c.values.assign(5, {});
  for (const auto& [rank, row] : newest) {
    c.groups.push_back("rank " + std::to_string(rank));
    for (size_t b = 0; b < 5; ++b) c.values[b].push_back(Get(row, keys[b]));
  }
  const double limit = Get(run.start(), "mem_limit");
  if (std::isfinite(limit) && limit > 0) {
    c.has_limit = true;
    c.limit = limit;
    c.limit_label = "--mem-limit " + FormatAxisNumber(limit) + "B";
  }
  return c;
}

std::string Row(const std::string& key, const std::string& value) {
  return "<tr><th>" + EscapeXml(key) + "</th><td>" + EscapeXml(value) + "</td></tr>";
}

std::string Header(const RunMetrics& run, size_t index) {
  const nlohmann::json s = run.start();
  std::string overrides;
  if (s.contains("overrides") && s["overrides"].is_array())
    for (const auto& o : s["overrides"]) overrides += " --set " + (o.is_string() ? o.get<std::string>() : o.dump());
  const double last = run.train.empty() ? 0 : Get(run.train.back(), "step");
  std::string status = run.finished() ? "finished" : "running or stopped (no done row)";
  if (run.torn_lines > 0) status += "; " + std::to_string(run.torn_lines) + " torn line(s) ignored";
  std::string html = "<div class=\"run\"><h2><span class=\"swatch\" style=\"background:" + Color(index) + "\"></span>" +
                     EscapeXml(run.name) + "</h2><table>";
  html += Row("directory", run.dir);
  html += Row("config", Text(s, "config") + overrides);
  html += Row("model", Text(s, "model") + " (" + Text(s, "parameters") + " parameters)");
  html += Row("layout", Text(s, "layout") + ", zero=" + Text(s, "zero") +
                            (s.value("deterministic", false) ? ", deterministic" : ""));
  html += Row("backend", Text(s, "backend") + ", world " + Text(s, "world") + ", " + Text(s, "threads") +
                             " compute thread(s) per worker");
  html += Row("lockstep", Text(s, "version"));
  html += Row("processor", Text(s, "processor") + " (" + Text(s, "host") + ")");
  char steps[96];
  std::snprintf(steps, sizeof(steps), "%.0f of %s, %zu start(s)", last, Text(s, "total_steps").c_str(),
                run.starts.size());
  html += Row("steps", steps);
  html += Row("status", status);
  html += Row("final weights_xxh64", run.finished() ? Text(run.done, "weights_xxh64") : "-");
  html += "</table>";
  if (s.contains("config_toml"))
    html +=
        "<details><summary>effective config</summary><pre>" + EscapeXml(Text(s, "config_toml")) + "</pre></details>";
  std::string notes;
  for (const nlohmann::json& e : run.Events("straggler"))
    notes += "<li>step " + Text(e, "step") + ": straggler rank " + Text(e, "rank") + " on " +
             EscapeXml(Text(e, "host")) + ", " + FormatAxisNumber(Get(e, "ratio")) + "x its peers' median</li>";
  for (const nlohmann::json& e : run.Events("restart"))
    notes += "<li>after step " + Text(e, "after_step") + ": restart " + Text(e, "attempt") + " (" +
             EscapeXml(Text(e, "cause")) + ")</li>";
  for (const nlohmann::json& e : run.Events("pipeline"))
    if (e.contains("measured_share"))
      notes += "<li>step " + Text(e, "step") + ": pipeline stages measured " + EscapeXml(Text(e, "measured_share")) +
               " of the work, estimated " + EscapeXml(Text(e, "estimated_share")) +
               (e.value("warning", false) ? " (more than 20% off)" : "") + "</li>";
  if (!run.skipped.empty()) notes += "<li>" + std::to_string(run.skipped.size()) + " step(s) skipped (non-finite)</li>";
  if (!notes.empty()) html += "<ul class=\"notes\">" + notes + "</ul>";
  return html + "</div>";
}

const char* kStyle = R"(body{font:14px/1.4 sans-serif;margin:20px;color:#222;background:#fff}
h1{font-size:20px;margin:0 0 12px}h2{font-size:16px;margin:8px 0}
.runs{display:flex;flex-wrap:wrap;gap:16px}.run{border:1px solid #ddd;border-radius:6px;padding:8px 12px}
.run table{border-collapse:collapse}.run th{text-align:left;padding:1px 10px 1px 0;color:#555;font-weight:normal}
.swatch{display:inline-block;width:12px;height:12px;margin-right:6px;border-radius:2px}
.charts{display:flex;flex-wrap:wrap;gap:12px;margin-top:16px}
svg.chart{border:1px solid #e5e5e5;border-radius:4px;background:#fff;font-size:11px}
svg .title{font-size:13px;font-weight:bold}svg .grid{stroke:#eee}svg .frame{fill:none;stroke:#999}
svg .legend{font-size:11px}svg .nodata{fill:#999;font-size:14px}svg .marker-label{font-size:10px}
pre{background:#f7f7f7;padding:6px;max-height:300px;overflow:auto})";

// Counts, per chart, the drawn primitives the browser gives a non-empty box, and the points it
// parsed in the polylines: <svg data-drawn="N" data-points="M">. For the browser test.
const char* kDomCheck = R"(<script>
for (const svg of document.querySelectorAll('svg.chart')) {
  let drawn = 0, points = 0;
  for (const el of svg.querySelectorAll('g.series polyline, g.series circle, path.area, rect.bar')) {
    const box = el.getBBox();
    if (box.width > 0 || box.height > 0) drawn++;
    if (el.points) points += el.points.numberOfItems;
  }
  svg.setAttribute('data-drawn', drawn);
  svg.setAttribute('data-points', points);
}
</script>)";

}  // namespace

std::string RenderRunReport(const std::vector<RunMetrics>& runs, ReportSummary* summary) {
  std::vector<std::string> charts;
  const bool text = runs.empty() || IsText(runs[0]);
  charts.push_back(RenderSvg(Loss(runs, false)));
  charts.push_back(RenderSvg(Loss(runs, true)));
  charts.push_back(RenderSvg(Overlay(runs, "lr", "Learning rate", "lr", "learning rate", true, false)));
  charts.push_back(RenderSvg(Overlay(runs, "grad_norm", "Gradient norm", "grad_norm", "global norm", true, true)));
  charts.push_back(
      RenderSvg(Overlay(runs, "throughput", text ? "Throughput (all workers)" : "Throughput (all workers)",
                        text ? "tokens_per_s" : "samples_per_s", text ? "tokens/s" : "samples/s", true, false)));
  // Bytes sent a step (runs written before comm_bytes existed have none: no empty chart).
  bool has_bytes = false;
  for (const RunMetrics& run : runs)
    for (const nlohmann::json& r : run.train) has_bytes = has_bytes || r.contains("comm_bytes");
  if (has_bytes)
    charts.push_back(RenderSvg(
        Overlay(runs, "comm_bytes", "Bytes sent a step (rank 0, ring count)", "comm_bytes", "bytes", true, false)));
  charts.push_back(RenderSvg(PerRank(runs, "rank_compute", "Compute time per rank", "rank_compute_ms")));
  charts.push_back(RenderSvg(PerRank(runs, "rank_wait", "Wait in collectives per rank", "rank_wait_ms")));
  for (const RunMetrics& run : runs) {
    charts.push_back(RenderSvg(StepSplit(run, runs.size())));
    charts.push_back(RenderSvg(Memory(run, runs.size())));
  }
  std::string title = "lockstep report:";
  for (const RunMetrics& run : runs) title += " " + run.name;
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + EscapeXml(title) +
                     "</title><style>" + kStyle + "</style></head><body><h1>" + EscapeXml(title) +
                     "</h1><div class=\"runs\">";
  int64_t torn = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    html += Header(runs[i], i);
    torn += runs[i].torn_lines;
  }
  html += "</div><div class=\"charts\">";
  for (const std::string& c : charts) html += c + "\n";
  html += "</div><p style=\"color:#888\">written by lockstep " + std::string(LOCKSTEP_VERSION) + "</p>";
  html += kDomCheck;
  html += "</body></html>\n";
  if (summary) {
    summary->charts = static_cast<int>(charts.size());
    summary->torn_lines = torn;
  }
  return html;
}

}  // namespace lockstep::report
