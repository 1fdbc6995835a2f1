// TraceRecorder: one rank's timeline of a run (forward, backward, each gradient bucket's
// allreduce, optimizer, data loading, waiting), written as Chrome trace JSON (chrome://tracing,
// Perfetto) with one track per rank. Each rank records into its own recorder (no locks);
// rank 0 gathers the serialized events of all ranks and writes the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/core/status.h"

namespace lockstep::trace {

class TraceRecorder {
 public:
  explicit TraceRecorder(int rank, bool enabled) : rank_(rank), enabled_(enabled) {}
  bool enabled() const { return enabled_; }
  // A complete event [start_ns, end_ns) on this rank's track (steady-clock nanoseconds).
  void Add(const char* name, const char* category, int64_t start_ns, int64_t end_ns);
  // This rank's events as Chrome-trace JSON objects separated by commas (no brackets), with
  // timestamps in microseconds since `origin_ns` (rank 0's start, shared by all ranks).
  std::string Serialize(int64_t origin_ns) const;
  size_t size() const { return events_.size(); }

 private:
  struct Event {
    const char* name;
    const char* category;
    int64_t start_ns, end_ns;
  };
  int rank_;
  bool enabled_;
  std::vector<Event> events_;
};

// Writes {"traceEvents": [...]} from every rank's Serialize() output, with a track name per rank.
Status WriteChromeTrace(const std::string& path, const std::vector<std::string>& per_rank);

}  // namespace lockstep::trace
