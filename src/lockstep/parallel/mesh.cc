#include "lockstep/parallel/mesh.h"

#include <sstream>
#include <vector>

namespace lockstep::parallel {
namespace {

Status Bad(const std::string& layout, const std::string& why) {
  return Status::InvalidArgument("--layout " + layout + ": " + why);
}

bool ParsePositive(const std::string& s, int* out) {
  if (s.empty() || s.size() > 6) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  *out = std::stoi(s);
  return *out > 0;
}

}  // namespace

Result<ParallelDims> ParallelDims::Parse(const std::string& layout, int world_size, int zero) {
  ParallelDims d;
  d.zero = zero;
  if (zero < 0 || zero > 3)
    return Status::InvalidArgument("--zero " + std::to_string(zero) + ": expected 0, 1, 2 or 3");
  if (layout.empty()) {
    d.dp = world_size;
    return d;
  }
  bool seen_dp = false, seen_tp = false, seen_pp = false;
  std::stringstream ss(layout);
  for (std::string part; std::getline(ss, part, ',');) {
    size_t eq = part.find('=');
    if (eq == std::string::npos) return Bad(layout, "'" + part + "' is not factor=N (expected e.g. dp=2,tp=2,pp=1)");
    std::string key = part.substr(0, eq);
    int value = 0;
    if (!ParsePositive(part.substr(eq + 1), &value))
      return Bad(layout, "'" + part + "': the degree must be a positive integer");
    int* slot = nullptr;
    bool* seen = nullptr;
    if (key == "dp")
      slot = &d.dp, seen = &seen_dp;
    else if (key == "tp")
      slot = &d.tp, seen = &seen_tp;
    else if (key == "pp")
      slot = &d.pp, seen = &seen_pp;
    else
      return Bad(layout, "unknown factor '" + key + "' (expected dp, tp, pp)");
    if (*seen) return Bad(layout, "factor '" + key + "' given twice");
    *seen = true;
    *slot = value;
  }
  if (!seen_dp && world_size % (d.tp * d.pp) == 0) d.dp = world_size / (d.tp * d.pp);
  if (d.world() != world_size) {
    return Bad(layout, "dp × tp × pp = " + std::to_string(d.dp) + " × " + std::to_string(d.tp) + " × " +
                           std::to_string(d.pp) + " = " + std::to_string(d.world()) + " workers, but the world has " +
                           std::to_string(world_size) + " (--nproc)");
  }
  return d;
}

std::string ParallelDims::ToString() const {
  return "dp=" + std::to_string(dp) + ",tp=" + std::to_string(tp) + ",pp=" + std::to_string(pp);
}

MeshCoord ParallelDims::CoordOf(int rank) const {
  MeshCoord c;
  c.tp = rank % tp;
  c.dp = (rank / tp) % dp;
  c.pp = rank / (tp * dp);
  return c;
}

int ParallelDims::RankOf(const MeshCoord& c) const { return (c.pp * dp + c.dp) * tp + c.tp; }

Result<DeviceMesh> BuildMesh(std::shared_ptr<comm::Communicator> world, const ParallelDims& dims) {
  if (dims.world() != world->size())
    return Status::InvalidArgument("layout " + dims.ToString() + " needs " + std::to_string(dims.world()) +
                                   " workers, the world has " + std::to_string(world->size()));
  DeviceMesh mesh;
  mesh.dims = dims;
  mesh.coord = dims.CoordOf(world->rank());
  const MeshCoord& c = mesh.coord;
  // A group is the set of ranks that agree on the other two coordinates; the color encodes
  // those, the key orders the group by its own coordinate. Three Splits, in the same order
  // on every rank.
  LS_ASSIGN_OR_RETURN(mesh.dp, world->Split(c.pp * dims.tp + c.tp, c.dp));
  LS_ASSIGN_OR_RETURN(mesh.tp, world->Split(c.pp * dims.dp + c.dp, c.tp));
  LS_ASSIGN_OR_RETURN(mesh.pp, world->Split(c.dp * dims.tp + c.tp, c.pp));
  mesh.world = std::move(world);
  return mesh;
}

}  // namespace lockstep::parallel
