// Small pure helpers of the threads algorithms: buffer overlap, chunk ownership, path choice.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "lockstep/comm/communicator.h"

namespace lockstep::comm::threads {

// Messages up to this many bytes take the latency path (every rank reduces everything).
constexpr size_t kSmallMessageBytes = 4096;
// Operations moving at least this many bytes wake the progress thread at once.
constexpr size_t kEagerBytes = 64 * 1024;
// Block size of work-shared reductions: about 8 blocks per rank, so that the ranks that run
// ahead can take over part of a late one's share, but at most kClaimBytes (the last block to
// finish then keeps the others waiting some tens of microseconds at most) and at least
// kMinClaimBytes (a claim, one atomic add, must stay negligible against its block).
constexpr size_t kClaimBytes = 256 * 1024;
constexpr size_t kMinClaimBytes = 16 * 1024;
inline size_t ClaimBlockBytes(size_t bytes, int world) {
  return std::clamp<size_t>(bytes / (8 * static_cast<size_t>(std::max(world, 1))), kMinClaimBytes, kClaimBytes);
}

inline bool Overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  if (a_bytes == 0 || b_bytes == 0) return false;
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

inline const void* Offset(const void* p, size_t bytes) { return static_cast<const unsigned char*>(p) + bytes; }
inline void* Offset(void* p, size_t bytes) { return static_cast<unsigned char*>(p) + bytes; }

struct Range {
  size_t begin = 0, end = 0;
  size_t size() const { return end - begin; }
};

// Part r of [0, count) cut into n near-equal parts (the first count % n parts one longer).
inline Range EvenShare(size_t count, int n, int r) {
  const size_t per = count / static_cast<size_t>(n), rem = count % static_cast<size_t>(n);
  const size_t ur = static_cast<size_t>(r);
  Range range;
  range.begin = ur * per + std::min(ur, rem);
  range.end = range.begin + per + (ur < rem ? 1 : 0);
  return range;
}

// The elements rank r of n owns: count split into n near-equal parts whose boundaries fall
// on 64-byte multiples, so that no two ranks write the same cache line of a peer's buffer.
inline Range ChunkOf(size_t count, int n, int r, size_t elem_size) {
  const size_t unit = std::max<size_t>(1, 64 / elem_size);
  const Range units = EvenShare((count + unit - 1) / unit, n, r);
  Range range;
  range.begin = std::min(count, units.begin * unit);
  range.end = std::min(count, units.end * unit);
  return range;
}

// A large reduction cut into blocks that ranks claim one at a time (Group::claims): about
// `block_bytes` each, with boundaries on 64-byte multiples of the address `base` (an output
// buffer), so that two ranks never write the same cache line of it. Block 0 absorbs the
// unaligned head.
struct BlockPlan {
  size_t count = 0;   // elements in all
  size_t block = 1;   // elements per block
  size_t skew = 0;    // elements before the first 64-byte boundary of `base`
  size_t blocks = 0;  // number of blocks
  Range Block(size_t j) const {
    Range r;
    r.begin = j == 0 ? 0 : std::min(count, skew + j * block);
    r.end = std::min(count, skew + (j + 1) * block);
    return r;
  }
};

inline BlockPlan PlanBlocks(size_t count, size_t elem_size, const void* base, size_t block_bytes) {
  const size_t unit = std::max<size_t>(1, 64 / elem_size);
  BlockPlan plan;
  plan.count = count;
  plan.block = std::max(unit, block_bytes / elem_size / unit * unit);
  const auto addr = reinterpret_cast<uintptr_t>(base);
  if (addr % elem_size == 0) plan.skew = std::min(count, ((64 - addr % 64) % 64) / elem_size);
  const size_t first = plan.skew + plan.block;
  plan.blocks = count == 0 ? 0 : count <= first ? 1 : 1 + (count - first + plan.block - 1) / plan.block;
  return plan;
}

inline bool UseDirectPath(Algorithm algorithm, size_t bytes) {
  if (algorithm == Algorithm::kDirect) return true;
  if (algorithm == Algorithm::kRing) return false;
  return bytes <= kSmallMessageBytes;
}

}  // namespace lockstep::comm::threads
