// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11).
// A value is a pure function of (seed, stream, counter): any rank can reproduce any sample
// of any other rank without communication, and the generator state that must be saved in
// a checkpoint is a single counter.
#pragma once

#include <array>
#include <cstdint>

namespace lockstep {

// Four 32-bit random words for block `counter` of `stream` under `seed`.
std::array<uint32_t, 4> Philox4x32(uint64_t seed, uint64_t stream, uint64_t counter);

// A stream of random numbers: (seed, stream) fixed, counter advancing.
// Each call consumes exactly one Philox block (4 words), so the counter after n calls is n
// and positions are easy to reason about and restore.
class Rng {
 public:
  Rng(uint64_t seed, uint64_t stream, uint64_t counter = 0) : seed_(seed), stream_(stream), counter_(counter) {}

  uint32_t NextU32() { return Philox4x32(seed_, stream_, counter_++)[0]; }
  uint64_t NextU64();
  // Uniform in [0, 1) with 24 random bits (exactly representable as float).
  float Uniform();
  // Standard normal (Box-Muller on one block).
  float Normal();
  // Uniform integer in [0, n) without modulo bias (Lemire's method), n > 0.
  uint64_t Below(uint64_t n);

  uint64_t seed() const { return seed_; }
  uint64_t stream() const { return stream_; }
  uint64_t counter() const { return counter_; }
  void set_counter(uint64_t c) { counter_ = c; }

 private:
  uint64_t seed_;
  uint64_t stream_;
  uint64_t counter_;
};

}  // namespace lockstep
