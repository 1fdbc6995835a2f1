// Where each parameter lives in the model's ONE flat float buffer, and whether it gets weight
// decay. Optimizers work on ranges of that buffer (llm.c style), never on per-tensor objects,
// so a ZeRO shard owner is just an optimizer that owns a sub-range.
#pragma once

#include <cstdint>
#include <vector>

#include "lockstep/core/result.h"

namespace lockstep::optim {

// One parameter's elements [offset, offset + size) in the flat buffer. Weight decay applies
// only where decay is true: by convention matrices (Linear/Conv weights, embeddings) are
// decayed and biases, LayerNorm gains/shifts are not (as nanoGPT/llm.c configure AdamW).
struct ParamGroupSpan {
  int64_t offset = 0;
  int64_t size = 0;
  bool decay = true;
};

// A half-open element range [begin, end) of the flat buffer.
struct FlatRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool Contains(const FlatRange& r) const { return r.begin >= begin && r.end <= end; }
};

// A maximal run of elements with the same decay flag, in flat-buffer coordinates.
struct DecaySegment {
  FlatRange range;
  bool decay = false;
};

// Splits `range` into runs of equal decay flag. Elements no span covers (alignment padding
// between parameters) count as decay=false: their gradient is zero, so AdamW/SGD leave them
// at whatever value they hold. Spans must not overlap; negative sizes are rejected.
Result<std::vector<DecaySegment>> DecaySegmentsFor(const std::vector<ParamGroupSpan>& groups, FlatRange range);

// Decay segments restricted to `sub` (which must lie inside the segments' union): used when an
// optimizer updates one piece of the range it owns.
std::vector<DecaySegment> ClipSegments(const std::vector<DecaySegment>& segments, FlatRange sub);

}  // namespace lockstep::optim
