// The device mesh: one owner of the parallel degrees, like torchtitan's
// ParallelDims. `--layout dp=2,tp=2,pp=1` (any order; a factor left out is 1, except dp,
// which defaults to whatever the world size leaves) is parsed and checked here once, and
// every other layer asks the mesh for its group instead of computing ranks itself.
//
// Rank order: tp is the fastest-varying coordinate, then dp, then pp (Megatron's order):
//   rank = (pp_index * dp + dp_index) * tp + tp_index
// so the ranks of one tensor-parallel group are adjacent (on one machine, where the
// per-layer allreduces are cheapest) and pipeline stages are the outermost blocks.
#pragma once

#include <memory>
#include <string>

#include "lockstep/comm/communicator.h"
#include "lockstep/core/result.h"

namespace lockstep::parallel {

struct MeshCoord {
  int dp = 0, tp = 0, pp = 0;
  bool operator==(const MeshCoord&) const = default;
};

struct ParallelDims {
  int dp = 1, tp = 1, pp = 1;
  int zero = 0;  // ZeRO stage over the dp dimension (0: replicated states)

  // layout: "" (all data parallel) or "k=v,k=v" with k in {dp, tp, pp}, each at most once.
  // InvalidArgument, one line, when a factor is unknown, repeated or not a positive integer,
  // or when the product is not the world size (the message names every factor).
  static Result<ParallelDims> Parse(const std::string& layout, int world_size, int zero = 0);

  int world() const { return dp * tp * pp; }
  std::string ToString() const;  // "dp=2,tp=2,pp=1"
  MeshCoord CoordOf(int rank) const;
  int RankOf(const MeshCoord& c) const;
};

// The communicators of one rank: the whole world, and its dp, tp and pp groups (each a
// Split of the world; a group of size 1 is still a communicator, so callers need no
// special case). Within a group, the group rank equals the coordinate on that dimension.
struct DeviceMesh {
  ParallelDims dims;
  MeshCoord coord;
  std::shared_ptr<comm::Communicator> world, dp, tp, pp;
};

// Collective over `world` (every rank must call it). InvalidArgument if dims.world() differs
// from the world's size.
Result<DeviceMesh> BuildMesh(std::shared_ptr<comm::Communicator> world, const ParallelDims& dims);

}  // namespace lockstep::parallel
