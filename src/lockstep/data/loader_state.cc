#include "lockstep/data/loader_state.h"

#include <nlohmann/json.hpp>

namespace lockstep::data {
namespace {

Result<int64_t> NonNegativeField(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) return Status::InvalidArgument(std::string("loader state: missing field '") + name + "'");
  if (!it->is_number_integer()) {
    return Status::InvalidArgument(std::string("loader state: field '") + name + "' must be an integer, got " +
                                   it->dump());
  }
  if (it->is_number_unsigned()) {
    uint64_t u = it->get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) {
      return Status::InvalidArgument(std::string("loader state: field '") + name + "' is too large");
    }
    return static_cast<int64_t>(u);
  }
  int64_t v = it->get<int64_t>();
  if (v < 0)
    return Status::InvalidArgument(std::string("loader state: field '") + name + "' must be >= 0, got " + it->dump());
  return v;
}

}  // namespace

nlohmann::json LoaderStateToJson(const LoaderState& s) {
  return nlohmann::json{{"epoch", s.epoch}, {"batch_in_epoch", s.batch_in_epoch}, {"seed", s.seed}};
}

Result<LoaderState> LoaderStateFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return Status::InvalidArgument("loader state: expected a JSON object, got " + j.dump());
  LoaderState s;
  LS_ASSIGN_OR_RETURN(s.epoch, NonNegativeField(j, "epoch"));
  LS_ASSIGN_OR_RETURN(s.batch_in_epoch, NonNegativeField(j, "batch_in_epoch"));
  auto it = j.find("seed");
  if (it == j.end()) return Status::InvalidArgument("loader state: missing field 'seed'");
  if (!it->is_number_integer() || (!it->is_number_unsigned() && it->get<int64_t>() < 0)) {
    return Status::InvalidArgument("loader state: field 'seed' must be an unsigned integer, got " + it->dump());
  }
  s.seed = it->get<uint64_t>();
  return s;
}

}  // namespace lockstep::data
