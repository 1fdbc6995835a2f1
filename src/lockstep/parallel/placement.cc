#include "lockstep/parallel/placement.h"

#include <algorithm>

#include "lockstep/tensor/check.h"

namespace lockstep::parallel {

TensorPlacement TensorPlacement::Whole(std::string name, tensor::Shape shape, bool tp_replicated) {
  TensorPlacement p;
  p.name = std::move(name);
  p.global_shape = std::move(shape);
  p.row_ranges = {{0, p.global_rows()}};
  p.col_begin = 0;
  p.col_end = p.global_cols();
  p.tp_replicated = tp_replicated;
  return p;
}

TensorPlacement TensorPlacement::Rows(std::string name, tensor::Shape shape,
                                      std::vector<std::pair<int64_t, int64_t>> ranges) {
  TensorPlacement p = Whole(std::move(name), std::move(shape), false);
  p.row_ranges = std::move(ranges);
  return p;
}

TensorPlacement TensorPlacement::Cols(std::string name, tensor::Shape shape, int64_t begin, int64_t end) {
  TensorPlacement p = Whole(std::move(name), std::move(shape), false);
  p.col_begin = begin;
  p.col_end = end;
  return p;
}

int64_t TensorPlacement::global_cols() const { return global_shape.size() >= 2 ? global_shape.back() : 1; }

int64_t TensorPlacement::global_rows() const { return tensor::NumElements(global_shape) / global_cols(); }

int64_t TensorPlacement::numel() const {
  int64_t rows = 0;
  for (const auto& [b, e] : row_ranges) rows += e - b;
  return rows * (col_end - col_begin);
}

tensor::Shape TensorPlacement::local_shape() const {
  int64_t rows = 0;
  for (const auto& [b, e] : row_ranges) rows += e - b;
  if (global_shape.size() < 2) return {rows};
  return {rows, col_end - col_begin};
}

std::vector<ElementRun> TensorPlacement::Runs() const { return RunsWithin(0, numel()); }

std::vector<ElementRun> TensorPlacement::RunsWithin(int64_t begin, int64_t end) const {
  std::vector<ElementRun> runs;
  const int64_t cols = global_cols(), width = col_end - col_begin;
  const bool full_rows = col_begin == 0 && col_end == cols;
  auto emit = [&](int64_t global, int64_t local, int64_t count) {
    // Clip to [begin, end) of the local tensor, then merge with the previous run if adjacent.
    const int64_t lo = std::max(local, begin), hi = std::min(local + count, end);
    if (lo >= hi) return;
    global += lo - local;
    if (!runs.empty() && runs.back().global + runs.back().count == global &&
        runs.back().local + runs.back().count == lo) {
      runs.back().count += hi - lo;
      return;
    }
    runs.push_back({global, lo, hi - lo});
  };
  int64_t local = 0;
  for (const auto& [rb, re] : row_ranges) {
    if (full_rows) {
      emit(rb * cols, local, (re - rb) * cols);
      local += (re - rb) * cols;
      continue;
    }
    for (int64_t r = rb; r < re; ++r, local += width) {
      if (local + width <= begin || local >= end) continue;
      emit(r * cols + col_begin, local, width);
    }
  }
  return runs;
}

}  // namespace lockstep::parallel
