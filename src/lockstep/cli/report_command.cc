#include "lockstep/cli/report_command.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "lockstep/report/run_report.h"

namespace lockstep::cli {

CLI::App* AddReportCommand(CLI::App& app, ReportArgs* args) {
  CLI::App* r = app.add_subcommand("report", "draw one or more runs' metrics as a self-contained HTML page");
  r->add_option("RUN_DIR", args->run_dirs, "run directories (--out of train); several are overlaid")->required();
  r->add_option("--out", args->out, "the HTML file to write (default: <first RUN_DIR>/report.html)");
  return r;
}

int RunReport(const ReportArgs& args) {
  std::vector<report::RunMetrics> runs;
  for (const std::string& dir : args.run_dirs) {
    Result<report::RunMetrics> run = report::ReadRunMetrics(dir);
    if (!run.ok()) {
      std::fprintf(stderr, "lockstep: error: %s\n", run.status().message().c_str());
      return 2;
    }
    runs.push_back(std::move(*run));
  }
  report::ReportSummary summary;
  const std::string html = report::RenderRunReport(runs, &summary);
  const std::string out = args.out.empty() ? args.run_dirs.front() + "/report.html" : args.out;
  std::ofstream file(out, std::ios::binary | std::ios::trunc);
  file << html;
  file.close();
  if (!file) {
    std::fprintf(stderr, "lockstep: error: cannot write %s: %s\n", out.c_str(), std::strerror(errno));
    return 2;
  }
  for (const report::RunMetrics& run : runs) {
    std::printf("%s: %zu training steps, %zu validations, %s%s\n", run.dir.c_str(), run.train.size(), run.val.size(),
                run.finished() ? "finished" : "not finished (running or stopped)",
                run.torn_lines > 0 ? (", " + std::to_string(run.torn_lines) + " torn line(s) ignored").c_str() : "");
  }
  std::printf("report written to %s (%d charts)\n", out.c_str(), summary.charts);
  return 0;
}

}  // namespace lockstep::cli
