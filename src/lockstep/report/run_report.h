// `lockstep report`: one self-contained HTML page (inline CSS and SVG, no network, no external
// script or font) showing one run, or several overlaid:
//   header      config, layout, backend, world size, version, processor, final hash per run
//   overlaid    training and validation loss against step and against tokens (samples) seen,
//               learning rate, gradient norm, throughput, every rank's compute and wait time;
//               skipped steps, restarts, resumes and stragglers as vertical markers,
//               checkpoints as ticks under the x axis
//   per run     the step time split into data, compute, pipeline bubble, exposed communication,
//               waiting for the slowest rank, optimizer, checkpoint stall and the rest, stacked
//               per step; memory per rank (parameters, gradients, optimizer, activations, peak)
//               against --mem-limit
// A small inline script counts what the browser drew in each chart into the chart's
// data-drawn attribute (the report's browser test reads it; the page needs it for nothing).
#pragma once

#include <string>
#include <vector>

#include "lockstep/report/run_metrics.h"

namespace lockstep::report {

struct ReportSummary {
  int charts = 0;          // <svg> charts in the page
  int64_t torn_lines = 0;  // unparsable lines skipped, all runs together
};

std::string RenderRunReport(const std::vector<RunMetrics>& runs, ReportSummary* summary);

}  // namespace lockstep::report
