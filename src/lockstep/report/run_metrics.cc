#include "lockstep/report/run_metrics.h"

#include <fstream>

namespace lockstep::report {
namespace {

std::string EventOf(const nlohmann::json& row) {
  auto it = row.find("event");
  return it != row.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::vector<nlohmann::json> RunMetrics::Events(const std::string& kind) const {
  std::vector<nlohmann::json> out;
  for (const nlohmann::json& e : events)
    if (EventOf(e) == kind) out.push_back(e);
  return out;
}

Result<RunMetrics> ReadRunMetrics(const std::string& dir) {
  const std::string path = dir + "/metrics.jsonl";
  std::ifstream in(path);
  if (!in) return Status::NotFound(dir + " is not a run directory (no readable metrics.jsonl in it)");
  RunMetrics run;
  run.dir = dir;
  std::string trimmed = dir;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  const size_t slash = trimmed.find_last_of('/');
  run.name = slash == std::string::npos ? trimmed : trimmed.substr(slash + 1);
  double last_step = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!row.is_object()) {
      ++run.torn_lines;
      continue;
    }
    const std::string event = EventOf(row);
    auto step = row.find("step");
    const bool has_step = step != row.end() && step->is_number();
    // A row without a step (the supervisor's restart) happened after the last step so far.
    if (!event.empty() && !has_step) row["after_step"] = last_step;
    if (event.empty() && has_step && row.contains("loss")) last_step = step->get<double>();
    if (event == "start")
      run.starts.push_back(std::move(row));
    else if (event == "done")
      run.done = std::move(row);
    else if (!event.empty())
      run.events.push_back(std::move(row));
    else if (row.contains("loss"))
      run.train.push_back(std::move(row));
    else if (row.contains("val_loss"))
      run.val.push_back(std::move(row));
    else if (row.contains("skipped"))
      run.skipped.push_back(std::move(row));
  }
  return run;
}

}  // namespace lockstep::report
