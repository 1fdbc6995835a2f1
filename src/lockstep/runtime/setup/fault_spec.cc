#include "lockstep/runtime/setup/fault_spec.h"

#include <cstdlib>
#include <sstream>
#include <vector>

namespace lockstep::runtime {
namespace {

Status Bad(const std::string& spec, const std::string& why) {
  return Status::InvalidArgument("--inject-fault '" + spec + "': " + why +
                                 " (expected kill:rank=R:step=S[:permanent], kill:rank=R:during=checkpoint[:step=S], "
                                 "hang:rank=R:step=S, nan:rank=R:step=S[:in=loss] or slow:rank=R:factor=F[:step=S])");
}

bool ParseInt(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 12) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  *out = std::stoll(s);
  return true;
}

}  // namespace

// The spec is a kind, then key=value fields in any order.
Result<FaultSpec> ParseFaultSpec(const std::string& spec, int world, int64_t total_steps) {
  FaultSpec f;
  if (spec.empty()) return f;
  std::vector<std::string> parts;
  std::stringstream ss(spec);
  for (std::string p; std::getline(ss, p, ':');) parts.push_back(p);
  const std::string& kind = parts[0];
  if (kind == "kill")
    f.kind = FaultSpec::Kind::kKill;
  else if (kind == "hang")
    f.kind = FaultSpec::Kind::kHang;
  else if (kind == "nan")
    f.kind = FaultSpec::Kind::kNan;
  else if (kind == "slow")
    f.kind = FaultSpec::Kind::kSlow;
  else
    return Bad(spec, "unknown fault '" + kind + "'");
  bool has_rank = false, has_step = false, has_factor = false;
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& field = parts[i];
    const size_t eq = field.find('=');
    const std::string key = field.substr(0, eq), value = eq == std::string::npos ? "" : field.substr(eq + 1);
    if (key == "rank" && !has_rank) {
      int64_t rank = 0;
      if (!ParseInt(value, &rank)) return Bad(spec, "bad rank");
      if (rank >= world)
        return Bad(spec, "rank " + std::to_string(rank) + " is not in a world of " + std::to_string(world));
      f.rank = static_cast<int>(rank);
      has_rank = true;
    } else if (key == "step" && !has_step) {
      if (!ParseInt(value, &f.step)) return Bad(spec, "bad step");
      if (f.step < 1 || f.step > total_steps)
        return Bad(spec, "step " + std::to_string(f.step) + " is not in this run's 1.." + std::to_string(total_steps));
      has_step = true;
    } else if (field == "during=checkpoint" && f.kind != FaultSpec::Kind::kKill) {
      return Bad(spec, "during=checkpoint is a kill");
    } else if (field == "during=checkpoint" && !f.during_checkpoint) {
      f.during_checkpoint = true;
    } else if (field == "permanent" && f.kind == FaultSpec::Kind::kKill && !f.permanent) {
      f.permanent = true;
    } else if (field == "in=loss" && f.kind == FaultSpec::Kind::kNan && !f.nan_in_loss) {
      f.nan_in_loss = true;
    } else if (key == "factor" && f.kind == FaultSpec::Kind::kSlow && !has_factor) {
      char* end = nullptr;
      f.factor = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(f.factor > 1.0) || f.factor > 1000.0)
        return Bad(spec, "factor must be a number in (1, 1000]");
      has_factor = true;
    } else {
      return Bad(spec, "unexpected field '" + field + "'");
    }
  }
  if (!has_rank) return Bad(spec, "no rank=R");
  if (f.kind == FaultSpec::Kind::kSlow && !has_factor) return Bad(spec, "no factor=F");
  if (!has_step && !f.during_checkpoint && f.kind != FaultSpec::Kind::kSlow) return Bad(spec, "no step=S");
  if (f.permanent && f.during_checkpoint) return Bad(spec, "permanent is a kill at a step, not during=checkpoint");
  return f;
}

bool StopDue(const FaultSpec& spec, int rank, int64_t step) {
  const bool stops = spec.kind == FaultSpec::Kind::kKill || spec.kind == FaultSpec::Kind::kHang;
  if (!stops || spec.during_checkpoint || rank != spec.rank) return false;
  // A permanent kill also fires in an attempt resumed past its step: the machine is still gone.
  return spec.permanent ? step + 1 >= spec.step : step + 1 == spec.step;
}

bool NanDue(const FaultSpec& spec, int rank, int64_t step, bool in_loss) {
  return spec.kind == FaultSpec::Kind::kNan && rank == spec.rank && step + 1 == spec.step &&
         spec.nan_in_loss == in_loss;
}

double SlowFactor(const FaultSpec& spec, int rank, int64_t step) {
  if (spec.kind != FaultSpec::Kind::kSlow || rank != spec.rank || step + 1 < spec.step) return 1.0;
  return spec.factor;
}

}  // namespace lockstep::runtime
