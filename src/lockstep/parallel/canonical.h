// Canonical state: the whole-model tensors that the ranks of any layout hold pieces of.
// A rank describes what it holds as pieces (name, global shape, element range, data) through
// the placements of its StageModel; every element of every tensor is contributed by exactly
// one rank (the "writer" rule below), so the pieces of all ranks tile the canonical tensors.
// Checkpoints write these pieces as shards, the weights hash and the text sample gather them
// at rank 0.
//
// Writer rule: a tensor replicated over the tensor-parallel group comes from tp rank 0 only;
// state replicated over data-parallel ranks from dp rank 0 only (the caller passes the
// range it writes: everything on dp rank 0, or its ZeRO shard on every dp rank).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lockstep/comm/communicator.h"
#include "lockstep/optim/param_groups.h"
#include "lockstep/parallel/stage_model.h"

namespace lockstep::parallel {

struct LocalPiece {
  std::string name;  // the parameter's name (callers add "model."/"optim.<kind>.")
  tensor::Shape global_shape;
  int64_t global_begin = 0, count = 0;
  const float* data = nullptr;  // count floats
};

// The pieces of `values` (a buffer laid out like m.params(), or the part of one starting at
// flat element `values_begin`) within local flat range `range`. Tensor-parallel replicated
// tensors are included only when tp_rank == 0, tied copies (placement.h) only for a reader
// (`reading`: the pieces to fill from a checkpoint).
std::vector<LocalPiece> PiecesOf(const StageModel& m, const float* values, int64_t values_begin, optim::FlatRange range,
                                 int tp_rank, bool reading = false);

using CanonicalTensors = std::map<std::string, std::vector<float>>;

// Collective over `world`: every rank sends its pieces to rank 0, which assembles the full
// tensors (sorted by name). Other ranks get an empty map.
Result<CanonicalTensors> GatherCanonical(comm::Communicator& world, const std::vector<LocalPiece>& mine);

// xxh64 of the tensors in name order, each full, little-endian fp32: the `done` line's
// weights_xxh64.
std::string CanonicalXxh64(const CanonicalTensors& tensors);

}  // namespace lockstep::parallel
