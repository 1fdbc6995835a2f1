#include "lockstep/comm/reduce_f32.h"

#include <cstdint>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace lockstep::comm {
namespace {

inline const float* F(const void* p) { return static_cast<const float*>(p); }
inline float* F(void* p) { return static_cast<float*>(p); }

// Scalar and vector semantics agree bit for bit: sum is IEEE addition in input order, avg
// divides once (the vector path divides too, never multiplies by a reciprocal), max/min are
// `a > b ? a : b` / `a < b ? a : b`, which is what vmaxps/vminps compute for (a, b).
struct SumF {
  static float S(float a, float b) { return a + b; }
#if defined(__AVX2__)
  static __m256 V(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
#endif
};
struct MaxF {
  static float S(float a, float b) { return a > b ? a : b; }
#if defined(__AVX2__)
  static __m256 V(__m256 a, __m256 b) { return _mm256_max_ps(a, b); }
#endif
};
struct MinF {
  static float S(float a, float b) { return a < b ? a : b; }
#if defined(__AVX2__)
  static __m256 V(__m256 a, __m256 b) { return _mm256_min_ps(a, b); }
#endif
};

// Elements [i, end) one at a time: heads, tails, and machines without AVX2.
template <class Op>
void ScalarRange(const void* const* in, int n_in, void* const* out, int n_out, size_t i, size_t end, bool avg,
                 float divisor) {
  for (; i < end; ++i) {
    float r = F(in[0])[i];
    for (int p = 1; p < n_in; ++p) r = Op::S(r, F(in[p])[i]);
    if (avg) r = r / divisor;
    for (int k = 0; k < n_out; ++k) F(out[k])[i] = r;
  }
}

#if defined(__AVX2__)
// 32 elements per step (four vectors, enough loads in flight to keep two memory streams
// busy per input). Every input is read for a step before any output of that step is
// written, which is what makes in-place (outputs aliasing inputs at the same index) safe.
// Returns the first element not done.
template <class Op, bool kStream>
size_t VectorRange(const void* const* in, int n_in, void* const* out, int n_out, size_t i, size_t end, bool avg,
                   float divisor) {
  constexpr size_t kStep = 32;
  const __m256 d = _mm256_set1_ps(divisor);
  for (; i + kStep <= end; i += kStep) {
    const float* a = F(in[0]) + i;
    __m256 v0 = _mm256_loadu_ps(a), v1 = _mm256_loadu_ps(a + 8);
    __m256 v2 = _mm256_loadu_ps(a + 16), v3 = _mm256_loadu_ps(a + 24);
    for (int p = 1; p < n_in; ++p) {
      const float* b = F(in[p]) + i;
      v0 = Op::V(v0, _mm256_loadu_ps(b));
      v1 = Op::V(v1, _mm256_loadu_ps(b + 8));
      v2 = Op::V(v2, _mm256_loadu_ps(b + 16));
      v3 = Op::V(v3, _mm256_loadu_ps(b + 24));
    }
    if (avg) {
      v0 = _mm256_div_ps(v0, d);
      v1 = _mm256_div_ps(v1, d);
      v2 = _mm256_div_ps(v2, d);
      v3 = _mm256_div_ps(v3, d);
    }
    for (int k = 0; k < n_out; ++k) {
      float* o = F(out[k]) + i;
      if constexpr (kStream) {
        _mm256_stream_ps(o, v0);
        _mm256_stream_ps(o + 8, v1);
        _mm256_stream_ps(o + 16, v2);
        _mm256_stream_ps(o + 24, v3);
      } else {
        _mm256_storeu_ps(o, v0);
        _mm256_storeu_ps(o + 8, v1);
        _mm256_storeu_ps(o + 16, v2);
        _mm256_storeu_ps(o + 24, v3);
      }
    }
  }
  return i;
}

// Streaming stores need 32-byte aligned addresses; one scalar head aligns every output at
// once only when all outputs sit at the same offset modulo 32 (buffers from one allocator
// usually do). Returns the number of head elements, or -1 when streaming is not possible.
long StreamHead(void* const* out, int n_out, size_t begin) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(F(out[0]) + begin);
  if (a % sizeof(float) != 0) return -1;
  for (int k = 1; k < n_out; ++k) {
    if ((reinterpret_cast<uintptr_t>(F(out[k]) + begin) & 31) != (a & 31)) return -1;
  }
  return static_cast<long>(((32 - (a & 31)) & 31) / sizeof(float));
}
#endif

template <class Op>
void Reduce(const void* const* in, int n_in, void* const* out, int n_out, size_t begin, size_t end, bool avg,
            float divisor, bool stream) {
  size_t i = begin;
#if defined(__AVX2__)
  const long head = stream ? StreamHead(out, n_out, begin) : -1;
  if (head >= 0 && end - begin >= static_cast<size_t>(head) + 32) {
    ScalarRange<Op>(in, n_in, out, n_out, i, i + head, avg, divisor);
    i = VectorRange<Op, true>(in, n_in, out, n_out, i + head, end, avg, divisor);
    // Streaming stores are weakly ordered: make them visible before the caller signals
    // peers that read these outputs.
    _mm_sfence();
  } else {
    i = VectorRange<Op, false>(in, n_in, out, n_out, i, end, avg, divisor);
  }
#endif
  ScalarRange<Op>(in, n_in, out, n_out, i, end, avg, divisor);
}

}  // namespace

void ReduceF32Fused(ReduceOp op, const void* const* inputs, int n_inputs, void* const* outputs, int n_outputs,
                    size_t begin, size_t end, int avg_divisor, bool stream) {
  if (begin >= end || n_inputs <= 0 || n_outputs <= 0) return;
  const bool avg = op == ReduceOp::kAvg;
  const float divisor = static_cast<float>(avg_divisor);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return Reduce<SumF>(inputs, n_inputs, outputs, n_outputs, begin, end, avg, divisor, stream);
    case ReduceOp::kMax:
      return Reduce<MaxF>(inputs, n_inputs, outputs, n_outputs, begin, end, avg, divisor, stream);
    case ReduceOp::kMin:
      return Reduce<MinF>(inputs, n_inputs, outputs, n_outputs, begin, end, avg, divisor, stream);
  }
}

}  // namespace lockstep::comm
