#include "planner/planner_test_util.h"

namespace lockstep::planner {

CommCurve Linear(double latency_ms, double ms_per_mb) {
  CommCurve c;
  for (int64_t b = 1024; b <= (int64_t{64} << 20); b *= 4)
    c.Add(b, latency_ms + ms_per_mb * static_cast<double>(b) / 1048576.0);
  return c;
}

CommTable Table(int group) {
  CommTable t;
  t.Set(CommOp::kAllreduce, group, Linear(0.1, 1.0));
  t.Set(CommOp::kReduceScatter, group, Linear(0.1, 0.5));
  t.Set(CommOp::kAllGather, group, Linear(0.1, 0.5));
  t.Set(CommOp::kSend, 2, Linear(0.05, 0.25));
  return t;
}

StageCost Stage(double fwd, double bwd, std::vector<int64_t> numels) {
  StageCost s;
  s.fwd_ms = fwd;
  s.bwd_ms = bwd;
  s.saved_bytes = 1000;
  s.workspace_bytes = 100;
  s.param_numels = numels;
  for (int i = 0; i < static_cast<int>(numels.size()); ++i) s.units.push_back({i, i + 1});
  return s;
}

}  // namespace lockstep::planner
