#include "lockstep/planner/comm_curve.h"

#include <algorithm>

namespace lockstep::planner {

void CommCurve::Add(int64_t bytes, double ms) {
  auto it = std::lower_bound(points_.begin(), points_.end(), std::make_pair(bytes, -1.0));
  if (it != points_.end() && it->first == bytes)
    it->second = ms;
  else
    points_.insert(it, {bytes, ms});
}

double CommCurve::Ms(int64_t bytes) const {
  if (bytes <= 0 || points_.empty()) return 0;
  if (bytes <= points_.front().first) return points_.front().second;
  const auto& last = points_.back();
  if (bytes >= last.first) return last.second * static_cast<double>(bytes) / static_cast<double>(last.first);
  auto hi = std::lower_bound(points_.begin(), points_.end(), std::make_pair(bytes, -1.0));
  auto lo = hi - 1;
  const double f = static_cast<double>(bytes - lo->first) / static_cast<double>(hi->first - lo->first);
  return lo->second + f * (hi->second - lo->second);
}

const char* CommOpName(CommOp op) {
  switch (op) {
    case CommOp::kAllreduce:
      return "allreduce";
    case CommOp::kReduceScatter:
      return "reduce_scatter";
    case CommOp::kAllGather:
      return "all_gather";
    case CommOp::kSend:
      return "send";
  }
  return "?";
}

double CommTable::Ms(CommOp op, int group, int64_t bytes, int hosts) const {
  if (group <= 1) return 0;
  auto it = curves_.find({op, group, hosts});
  return it == curves_.end() ? 0 : it->second.Ms(bytes);
}

void CommTable::Merge(const CommTable& other) {
  for (const auto& [key, curve] : other.curves_) curves_[key] = curve;
}

nlohmann::json CommTable::ToJson() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [key, curve] : curves_) {
    nlohmann::json pts = nlohmann::json::array();
    for (const auto& [b, ms] : curve.points()) pts.push_back({b, ms});
    const auto& [op, group, hosts] = key;
    nlohmann::json e = {{"op", CommOpName(op)}, {"group", group}, {"points", pts}};
    if (hosts > 1) e["hosts"] = hosts;
    out.push_back(std::move(e));
  }
  return out;
}

Result<CommTable> CommTable::FromJson(const nlohmann::json& j) {
  CommTable t;
  if (!j.is_array()) return Status::InvalidArgument("collectives: expected an array");
  const CommOp ops[] = {CommOp::kAllreduce, CommOp::kReduceScatter, CommOp::kAllGather, CommOp::kSend};
  for (const nlohmann::json& e : j) {
    if (!e.is_object() || !e.contains("op") || !e.contains("group") || !e.contains("points"))
      return Status::InvalidArgument("collectives: an entry without op, group and points");
    const std::string name = e["op"].get<std::string>();
    auto op = std::find_if(std::begin(ops), std::end(ops), [&](CommOp o) { return name == CommOpName(o); });
    if (op == std::end(ops)) return Status::InvalidArgument("collectives: unknown op '" + name + "'");
    CommCurve c;
    for (const nlohmann::json& p : e["points"]) c.Add(p.at(0).get<int64_t>(), p.at(1).get<double>());
    t.Set(*op, e["group"].get<int>(), std::move(c), e.value("hosts", 1));
  }
  return t;
}

}  // namespace lockstep::planner
