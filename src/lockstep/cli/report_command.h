// `lockstep report RUN_DIR... [--out FILE.html]`: the runs' metrics as one self-contained HTML
// page of charts (report/run_report.h).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace lockstep::cli {

struct ReportArgs {
  std::vector<std::string> run_dirs;
  std::string out;  // default: <first RUN_DIR>/report.html
};

// Adds the `report` subcommand to `app`, filling *args when it is parsed.
CLI::App* AddReportCommand(CLI::App& app, ReportArgs* args);

// Writes the report; returns the exit status (2 for a directory that is not a run, or an
// output that cannot be written).
int RunReport(const ReportArgs& args);

}  // namespace lockstep::cli
