// Collective costs for `lockstep plan`: the time of each collective the layouts would issue,
// as a function of message size and group size, from points measured on the chosen backend
// (bench-comm's measuring code, cli/bench_comm_measure.h) or derived from a hardware file.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/core/result.h"

namespace lockstep::planner {

// One collective on one group size: measured (bytes, ms) points. Between two points the time
// is interpolated linearly; below the smallest it is the smallest's time (the latency floor);
// above the largest it grows at the largest point's bandwidth. `bytes` is bench-comm's: the
// whole vector (all n blocks for reduce-scatter and all-gather).
class CommCurve {
 public:
  void Add(int64_t bytes, double ms);
  double Ms(int64_t bytes) const;  // 0 for bytes <= 0 or no points
  bool empty() const { return points_.empty(); }
  const std::vector<std::pair<int64_t, double>>& points() const { return points_; }

 private:
  std::vector<std::pair<int64_t, double>> points_;  // sorted by bytes
};

enum class CommOp { kAllreduce, kReduceScatter, kAllGather, kSend };
const char* CommOpName(CommOp op);  // "allreduce", "reduce_scatter", "all_gather", "send"

// Every curve a plan needs, keyed by (collective, group size, hosts the group spans). A group
// of one costs nothing. `hosts` is 1 for a group inside one machine (every group of a plan
// without --hosts); across hosts (host_placement.h) the same group size is another curve, the
// link's rather than the machine's.
class CommTable {
 public:
  void Set(CommOp op, int group, CommCurve curve, int hosts = 1) { curves_[{op, group, hosts}] = std::move(curve); }
  bool Has(CommOp op, int group, int hosts = 1) const { return group <= 1 || curves_.count({op, group, hosts}) > 0; }
  // Time of one collective of `bytes` over `group` ranks on `hosts` hosts; a missing curve is 0
  // (Has says).
  double Ms(CommOp op, int group, int64_t bytes, int hosts = 1) const;

  void Merge(const CommTable& other);  // other's curves added (replacing those of the same key)
  nlohmann::json ToJson() const;
  static Result<CommTable> FromJson(const nlohmann::json& j);

 private:
  std::map<std::tuple<CommOp, int, int>, CommCurve> curves_;
};

}  // namespace lockstep::planner
