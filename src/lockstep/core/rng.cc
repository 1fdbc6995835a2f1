#include "lockstep/core/rng.h"

#include <cmath>

namespace lockstep {
namespace {

constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;
constexpr uint32_t kWeyl1 = 0xBB67AE85u;

inline void MulHiLo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  *lo = static_cast<uint32_t>(p);
}

}  // namespace

std::array<uint32_t, 4> Philox4x32(uint64_t seed, uint64_t stream, uint64_t counter) {
  // Counter words: (counter lo, counter hi, stream lo, stream hi); key: seed.
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = static_cast<uint32_t>(stream), c3 = static_cast<uint32_t>(stream >> 32);
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    MulHiLo(kMul0, c0, &hi0, &lo0);
    MulHiLo(kMul1, c2, &hi1, &lo1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return {c0, c1, c2, c3};
}

uint64_t Rng::NextU64() {
  auto w = Philox4x32(seed_, stream_, counter_++);
  return (static_cast<uint64_t>(w[0]) << 32) | w[1];
}

float Rng::Uniform() { return static_cast<float>(NextU32() >> 8) * (1.0f / 16777216.0f); }

float Rng::Normal() {
  auto w = Philox4x32(seed_, stream_, counter_++);
  // u1 in (0, 1] so log() is finite; u2 in [0, 1).
  double u1 = (static_cast<double>(w[0] >> 8) + 1.0) * (1.0 / 16777216.0);
  double u2 = static_cast<double>(w[1] >> 8) * (1.0 / 16777216.0);
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

uint64_t Rng::Below(uint64_t n) {
  // Lemire's nearly-divisionless method on 64-bit words.
  while (true) {
    unsigned __int128 m = static_cast<unsigned __int128>(NextU64()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low >= n || low >= (-n) % n) return static_cast<uint64_t>(m >> 64);
  }
}

}  // namespace lockstep
