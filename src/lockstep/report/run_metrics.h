// A run's metrics.jsonl read back for `lockstep report`: its rows sorted by kind. Works on a
// run that is still going (whatever is on disk now) and on one that was killed: a line that is
// not a JSON object (a row torn by the crash, or one being written) is skipped and counted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/core/result.h"

namespace lockstep::report {

struct RunMetrics {
  std::string dir;                      // as given
  std::string name;                     // the directory's last component
  std::vector<nlohmann::json> starts;   // {"event":"start"} rows: one per start or restart
  std::vector<nlohmann::json> train;    // rows with a "loss" (training steps), in file order
  std::vector<nlohmann::json> val;      // rows with a "val_loss"
  std::vector<nlohmann::json> skipped;  // rows with "skipped" (non-finite steps)
  std::vector<nlohmann::json> events;   // every other row with an "event" (checkpoint, memory, ...)
  nlohmann::json done;                  // the {"event":"done"} row; null while running or after a kill
  int64_t torn_lines = 0;               // lines skipped as unparsable

  bool finished() const { return done.is_object(); }
  // The newest start row, or an empty object when the run has none (an older lockstep).
  nlohmann::json start() const { return starts.empty() ? nlohmann::json::object() : starts.back(); }
  // Rows whose "event" is `kind`, in file order.
  std::vector<nlohmann::json> Events(const std::string& kind) const;
};

// NotFound when `dir` has no metrics.jsonl (one line naming it).
Result<RunMetrics> ReadRunMetrics(const std::string& dir);

}  // namespace lockstep::report
