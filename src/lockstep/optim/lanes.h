// A tiny lane-vector abstraction for the optimizer kernels: 8 floats in an AVX register on
// x86-64-v3 (the build's floor), or a plain array elsewhere. Only IEEE-exact operations
// (add, mul, div, sqrt) are offered, so a lane's result is the same on every machine that
// runs the same binary. Internal to optim/.
#pragma once

#include <cmath>

#if defined(__AVX__)
#include <immintrin.h>
#endif

namespace lockstep::optim {

inline constexpr int kLanes = 8;

#if defined(__AVX__)
using LaneVec = __m256;
inline LaneVec Load(const float* p) { return _mm256_loadu_ps(p); }
inline void Store(float* p, LaneVec x) { _mm256_storeu_ps(p, x); }
inline LaneVec Splat(float x) { return _mm256_set1_ps(x); }
inline LaneVec Add(LaneVec a, LaneVec b) { return _mm256_add_ps(a, b); }
inline LaneVec Mul(LaneVec a, LaneVec b) { return _mm256_mul_ps(a, b); }
inline LaneVec Div(LaneVec a, LaneVec b) { return _mm256_div_ps(a, b); }
inline LaneVec Sqrt(LaneVec a) { return _mm256_sqrt_ps(a); }
#else
struct LaneVec {
  float x[kLanes];
};
inline LaneVec Load(const float* p) {
  LaneVec r;
  for (int i = 0; i < kLanes; ++i) r.x[i] = p[i];
  return r;
}
inline void Store(float* p, LaneVec a) {
  for (int i = 0; i < kLanes; ++i) p[i] = a.x[i];
}
inline LaneVec Splat(float v) {
  LaneVec r;
  for (int i = 0; i < kLanes; ++i) r.x[i] = v;
  return r;
}
#define LOCKSTEP_LANE_BINOP(name, op)                           \
  inline LaneVec name(LaneVec a, LaneVec b) {                   \
    for (int i = 0; i < kLanes; ++i) a.x[i] = a.x[i] op b.x[i]; \
    return a;                                                   \
  }
LOCKSTEP_LANE_BINOP(Add, +)
LOCKSTEP_LANE_BINOP(Mul, *)
LOCKSTEP_LANE_BINOP(Div, /)
#undef LOCKSTEP_LANE_BINOP
inline LaneVec Sqrt(LaneVec a) {
  for (int i = 0; i < kLanes; ++i) a.x[i] = std::sqrt(a.x[i]);
  return a;
}
#endif

}  // namespace lockstep::optim
