// TensorPlacement: where a rank's local parameter tensor sits inside the global (canonical)
// tensor of the same name. Tensor parallelism cuts matrices into row blocks (column-parallel
// layers, vocabulary-parallel embeddings: contiguous in the global tensor) or column blocks
// (row-parallel layers: one run per row); the fused qkv projection takes three row blocks, one
// from each of q, k and v. Everything that crosses layouts (initialisation, checkpoints, the
// weights hash, resharding loads) goes through the element runs of a placement, so no other
// code needs to know how a layer was split.
//
// The global tensor is viewed as a matrix [rows, cols] with cols = its last dimension (a 1-D
// tensor of n elements is [n, 1]). The local tensor is the listed row ranges, in order, each
// restricted to columns [col_begin, col_end), stored row-major and contiguous.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/tensor/tensor.h"

namespace lockstep::parallel {

struct ElementRun {
  int64_t global = 0;  // first element in the flattened global tensor
  int64_t local = 0;   // first element in the flattened local tensor
  int64_t count = 0;
};

struct TensorPlacement {
  std::string name;
  tensor::Shape global_shape;
  std::vector<std::pair<int64_t, int64_t>> row_ranges;  // [begin, end) rows of the global matrix
  int64_t col_begin = 0, col_end = 0;
  // Every tensor-parallel rank holds this same full tensor (LayerNorm, biases after a
  // row-parallel layer, position embeddings): counted once in norms, written once.
  bool tp_replicated = false;
  // A copy of a tensor another pipeline stage owns under the same name (GPT-2's tied head:
  // the last stage's copy of wte.weight). It starts from and loads the owner's values, and
  // its gradient is summed with the owner's each step so both stay identical; it is never
  // written to checkpoints, hashed or counted in the gradient norm.
  bool tied_copy = false;

  // The whole tensor, held whole (data parallelism, tp = 1).
  static TensorPlacement Whole(std::string name, tensor::Shape shape, bool tp_replicated = true);
  // Rows [begin, end) of each listed range, all columns.
  static TensorPlacement Rows(std::string name, tensor::Shape shape, std::vector<std::pair<int64_t, int64_t>> ranges);
  // All rows, columns [begin, end).
  static TensorPlacement Cols(std::string name, tensor::Shape shape, int64_t begin, int64_t end);

  int64_t global_rows() const;
  int64_t global_cols() const;
  int64_t numel() const;              // of the local tensor
  tensor::Shape local_shape() const;  // [local rows, local cols] or [local rows] for 1-D
  // Maximal contiguous runs covering the local tensor, in local order.
  std::vector<ElementRun> Runs() const;
  // The runs of local elements [begin, end) only (a ZeRO shard's part of this tensor).
  std::vector<ElementRun> RunsWithin(int64_t begin, int64_t end) const;
};

}  // namespace lockstep::parallel
