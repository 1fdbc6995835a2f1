#include "lockstep/comm/reduce_kernels.h"

#include <algorithm>
#include <cstring>

#include "lockstep/comm/reduce_f32.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace lockstep::comm {

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
    case DType::kU8:
      return;  // rejected by ValidateCall
  }
}

}  // namespace lockstep::comm
