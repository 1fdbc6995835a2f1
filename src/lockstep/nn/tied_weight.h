// Tied embeddings (GPT-2's head shares the token embedding's table): the head's use of the
// table, with the head's gradient kept apart and added into the table's gradient only after
// the embedding's own gradient is complete.
//
// Why not let both ops accumulate into the one gradient: backward runs the head first, so the
// embedding would then scatter-add its rows onto the head's gradient, ((h + e1) + e2) + ...;
// a pipeline whose first stage holds the embedding and last stage the head can only form
// (e1 + e2 + ...) + h. Defining the tied gradient as e + h everywhere (one IEEE addition,
// commutative) gives every layout the same bits. It also keeps the table's gradient out of
// the head's backward, which ZeRO-2/3 need: the table's gradient buffer exists only while
// backward is inside the embedding's unit.
#pragma once

#include "lockstep/autograd/tape.h"

namespace lockstep::nn {

// Call BEFORE the embedding op that reads `table` (so that the closure recorded here runs
// after the embedding's backward). Returns the table as the head's weight: the same values
// (a view holding their storage: ZeRO-3 may release the parameter itself meanwhile), with a
// gradient of its own that is added into table's gradient at the end of backward. Without
// recording, a constant view of the values.
autograd::Variable TiedHeadWeight(autograd::Tape& tape, const autograd::Variable& table);

}  // namespace lockstep::nn
