#include "lockstep/comm/reduce_kernels.h"

#include <algorithm>
#include <cstring>

#include "lockstep/comm/reduce_f32.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace lockstep::comm {

uint16_t F32ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float Bf16ToF32(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

void Bf16ToF32(const uint16_t* in, float* out, size_t count) {
  size_t i = 0;
#if defined(__AVX2__)
  for (; i + 8 <= count; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    _mm256_storeu_ps(out + i, _mm256_castsi256_ps(w));
  }
#endif
  for (; i < count; ++i) out[i] = Bf16ToF32(in[i]);
}

void F32ToBf16(const float* in, uint16_t* out, size_t count) {
  size_t i = 0;
#if defined(__AVX2__)
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(0x7f800000);
  const __m256i bias = _mm256_set1_epi32(0x7fff);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i quiet = _mm256_set1_epi32(0x400000);
  for (; i + 8 <= count; i += 8) {
    __m256i u = _mm256_castps_si256(_mm256_loadu_ps(in + i));
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    __m256i rounded = _mm256_add_epi32(u, _mm256_add_epi32(bias, lsb));
    __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
    __m256i r = _mm256_blendv_epi8(rounded, _mm256_or_si256(u, quiet), is_nan);
    r = _mm256_srli_epi32(r, 16);
    // Pack 8 x u32 (each < 65536) into 8 x u16; packus works per 128-bit lane.
    __m128i lo = _mm256_castsi256_si128(r);
    __m128i hi = _mm256_extracti128_si256(r, 1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm_packus_epi32(lo, hi));
  }
#endif
  for (; i < count; ++i) out[i] = F32ToBf16(in[i]);
}

namespace {

constexpr size_t kBlock = 1024;  // elements per block: the accumulator stays in L1
// Outputs larger than this (in all) are written with non-temporal stores (StreamOutputs).
constexpr size_t kStreamBytes = size_t{8} << 20;

// dst[0, bytes) = src[0, bytes); streaming stores when `stream` (fenced by the caller).
void StoreBlock(void* dst, const void* src, size_t bytes, bool stream) {
#if defined(__AVX2__)
  if (stream && bytes >= 128) {
    auto* d = static_cast<unsigned char*>(dst);
    auto* s = static_cast<const unsigned char*>(src);
    size_t head = (32 - (reinterpret_cast<uintptr_t>(d) & 31)) & 31;
    std::memcpy(d, s, head);
    size_t i = head;
    for (; i + 32 <= bytes; i += 32) {
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
    }
    std::memcpy(d + i, s + i, bytes - i);
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

void StoreFence(bool stream) {
#if defined(__AVX2__)
  // Streaming stores are weakly ordered: make them visible before the caller signals peers.
  if (stream) _mm_sfence();
#endif
}

// acc[i] = op(acc[i], in[i]). Scalar semantics match the AVX2 ones: max = a > b ? a : b.
void CombineF32(ReduceOp op, float* __restrict acc, const float* __restrict in, size_t n) {
  size_t i = 0;
#if defined(__AVX2__)
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), _mm256_loadu_ps(in + i)));
      break;
    case ReduceOp::kMax:
      for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(acc + i, _mm256_max_ps(_mm256_loadu_ps(acc + i), _mm256_loadu_ps(in + i)));
      break;
    case ReduceOp::kMin:
      for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(acc + i, _mm256_min_ps(_mm256_loadu_ps(acc + i), _mm256_loadu_ps(in + i)));
      break;
  }
#endif
  for (; i < n; ++i) {
    float a = acc[i], b = in[i];
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc[i] = a + b;
        break;
      case ReduceOp::kMax:
        acc[i] = a > b ? a : b;
        break;
      case ReduceOp::kMin:
        acc[i] = a < b ? a : b;
        break;
    }
  }
}

void DivideF32(float* acc, size_t n, int divisor) {
  const float d = static_cast<float>(divisor);
  for (size_t i = 0; i < n; ++i) acc[i] = acc[i] / d;
}

// Integers wrap on overflow (computed unsigned) instead of invoking undefined behaviour.
template <typename T, typename U>
void CombineInt(ReduceOp op, T* __restrict acc, const T* __restrict in, size_t n) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      for (size_t i = 0; i < n; ++i) acc[i] = static_cast<T>(static_cast<U>(acc[i]) + static_cast<U>(in[i]));
      break;
    case ReduceOp::kMax:
      for (size_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], in[i]);
      break;
    case ReduceOp::kMin:
      for (size_t i = 0; i < n; ++i) acc[i] = std::min(acc[i], in[i]);
      break;
  }
}

template <typename T, typename U>
void ReduceIntRange(ReduceOp op, const void* const* inputs, int n_inputs, void* const* outputs, int n_outputs,
                    size_t begin, size_t end, int avg_divisor, bool stream) {
  T acc[kBlock];
  for (size_t b = begin; b < end; b += kBlock) {
    const size_t n = std::min(kBlock, end - b);
    std::memcpy(acc, static_cast<const T*>(inputs[0]) + b, n * sizeof(T));
    for (int p = 1; p < n_inputs; ++p) CombineInt<T, U>(op, acc, static_cast<const T*>(inputs[p]) + b, n);
    if (op == ReduceOp::kAvg) {
      const T d = static_cast<T>(avg_divisor);
      for (size_t i = 0; i < n; ++i) acc[i] = acc[i] / d;
    }
    for (int k = 0; k < n_outputs; ++k) StoreBlock(static_cast<T*>(outputs[k]) + b, acc, n * sizeof(T), stream);
  }
  StoreFence(stream);
}

void ReduceF32Range(ReduceOp op, const void* const* inputs, int n_inputs, void* const* outputs, int n_outputs,
                    size_t begin, size_t end, int avg_divisor, bool stream) {
  ReduceF32Fused(op, inputs, n_inputs, outputs, n_outputs, begin, end, avg_divisor, stream);
}

void ReduceBf16Range(ReduceOp op, const void* const* inputs, int n_inputs, void* const* outputs, int n_outputs,
                     size_t begin, size_t end, int avg_divisor, bool stream) {
  alignas(64) float acc[kBlock];
  alignas(64) float tmp[kBlock];
  alignas(64) uint16_t packed[kBlock];
  for (size_t b = begin; b < end; b += kBlock) {
    const size_t n = std::min(kBlock, end - b);
    Bf16ToF32(static_cast<const uint16_t*>(inputs[0]) + b, acc, n);
    for (int p = 1; p < n_inputs; ++p) {
      Bf16ToF32(static_cast<const uint16_t*>(inputs[p]) + b, tmp, n);
      CombineF32(op, acc, tmp, n);
    }
    if (op == ReduceOp::kAvg) DivideF32(acc, n, avg_divisor);
    F32ToBf16(acc, packed, n);
    for (int k = 0; k < n_outputs; ++k)
      StoreBlock(static_cast<uint16_t*>(outputs[k]) + b, packed, n * sizeof(uint16_t), stream);
  }
  StoreFence(stream);
}

}  // namespace

bool StreamOutputs(size_t out_bytes) { return out_bytes >= kStreamBytes; }

void ReduceRange(DType dtype, ReduceOp op, const void* const* inputs, int n_inputs, void* const* outputs, int n_outputs,
                 size_t begin, size_t end, int avg_divisor) {
  if (begin >= end) return;
  const size_t out_bytes = (end - begin) * DTypeSize(dtype) * static_cast<size_t>(n_outputs);
  ReduceRange(dtype, op, inputs, n_inputs, outputs, n_outputs, begin, end, avg_divisor, StreamOutputs(out_bytes));
}

void ReduceRange(DType dtype, ReduceOp op, const void* const* inputs, int n_inputs, void* const* outputs, int n_outputs,
                 size_t begin, size_t end, int avg_divisor, bool stream) {
  if (begin >= end || n_inputs <= 0) return;
  switch (dtype) {
    case DType::kF32:
      return ReduceF32Range(op, inputs, n_inputs, outputs, n_outputs, begin, end, avg_divisor, stream);
    case DType::kBF16:
      return ReduceBf16Range(op, inputs, n_inputs, outputs, n_outputs, begin, end, avg_divisor, stream);
    case DType::kI32:
      return ReduceIntRange<int32_t, uint32_t>(op, inputs, n_inputs, outputs, n_outputs, begin, end, avg_divisor,
                                               stream);
    case DType::kI64:
      return ReduceIntRange<int64_t, uint64_t>(op, inputs, n_inputs, outputs, n_outputs, begin, end, avg_divisor,
                                               stream);
    case DType::kBytes:
      return;  // rejected by ValidateCall
  }
}

}  // namespace lockstep::comm
