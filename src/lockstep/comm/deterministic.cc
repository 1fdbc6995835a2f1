// The fixed reduction tree of DeterministicAllreduceF32 (docs/deterministic-reduction.md).
#include <algorithm>
#include <cstring>
#include <vector>

#include "lockstep/comm/communicator.h"

namespace lockstep::comm {

namespace {

constexpr size_t kTreeBlock = 512;  // floats per block; the partial-sum stack stays in L1/L2

void AddInto(float* __restrict dst, const float* __restrict src, size_t n) {
  for (size_t j = 0; j < n; ++j) dst[j] = dst[j] + src[j];
}

void PairSum(float* __restrict dst, const float* a, const float* b, size_t n) {
  for (size_t j = 0; j < n; ++j) dst[j] = a[j] + b[j];
}

bool IsPowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

Status ValidateDeterministicContributions(int64_t total_contributions, int world_size) {
  if (!IsPowerOfTwo(total_contributions)) {
    return Status::InvalidArgument("total_contributions must be a power of two, got " +
                                   std::to_string(total_contributions));
  }
  if (world_size <= 0 || total_contributions % world_size != 0) {
    return Status::InvalidArgument("total_contributions (" + std::to_string(total_contributions) +
                                   ") must be a multiple of the world size (" + std::to_string(world_size) + ")");
  }
  return Status::Ok();
}

// Walks the inputs left to right, keeping a stack of finished subtrees like a binary counter:
// a new pair (in[i] + in[i+1]) is a level-1 subtree; while the stack top has the same level,
// the two merge as (older + newer) into one subtree a level higher. For n a power of two this
// evaluates exactly the complete binary tree ((c0+c1)+(c2+c3))+..., block by block.
void DeterministicTreeSum(const float* const* inputs, int64_t n, float* out, size_t count) {
  if (count == 0 || n <= 0) return;
  if (n == 1) {
    if (out != inputs[0]) std::memmove(out, inputs[0], count * sizeof(float));
    return;
  }
  int levels = 0;
  while ((int64_t{1} << levels) < n) ++levels;
  std::vector<float> stack(static_cast<size_t>(levels) * kTreeBlock);
  std::vector<int> stack_level(static_cast<size_t>(levels));
  for (size_t b = 0; b < count; b += kTreeBlock) {
    const size_t len = std::min(kTreeBlock, count - b);
    int depth = 0;
    for (int64_t i = 0; i + 1 < n; i += 2) {
      float* t = &stack[static_cast<size_t>(depth) * kTreeBlock];
      PairSum(t, inputs[i] + b, inputs[i + 1] + b, len);
      int level = 1;
      while (depth > 0 && stack_level[depth - 1] == level) {
        float* left = &stack[static_cast<size_t>(depth - 1) * kTreeBlock];
        AddInto(left, t, len);
        t = left;
        --depth;
        ++level;
      }
      stack_level[depth] = level;
      ++depth;
    }
    std::memcpy(out + b, stack.data(), len * sizeof(float));
  }
}

}  // namespace lockstep::comm
