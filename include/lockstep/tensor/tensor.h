// Tensor: a shape/stride view into shared, 64-byte aligned, tracked storage.
// Copying a Tensor copies the handle (both share storage), like torch.Tensor; Clone()
// copies the data. Views (View, Slice, Transpose, FromStorage) share storage too, which is
// how a model keeps all parameters (and all gradients) in one flat buffer with one view
// per parameter (DESIGN.md: "one flat buffer with per-parameter views").
//
// Misuse (wrong shape, wrong dtype, out-of-range slice) is a lockstep bug and aborts with a
// message via LS_CHECK; only allocation against a memory limit has a recoverable path
// (TryEmpty).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "lockstep/core/dtype.h"
#include "lockstep/core/result.h"
#include "lockstep/tensor/check.h"
#include "lockstep/tensor/memory.h"

namespace lockstep::tensor {

// Tensors hold f32, bf16 (a storage format: the operands of mixed-precision GEMMs,
// precision.h; kernels compute in fp32) or i32 (token ids, targets, pooling indices).
using lockstep::DType;
using lockstep::DTypeName;
using lockstep::DTypeSize;

using Shape = std::vector<int64_t>;
int64_t NumElements(const Shape& s);
std::string ShapeToString(const Shape& s);  // "[2, 3]"

// An owned aligned buffer counted in the tracker current at allocation time.
class Storage {
 public:
  // Returns nullptr when the tracker's memory limit would be exceeded (or out of memory).
  static std::shared_ptr<Storage> Allocate(size_t bytes, MemoryTag tag);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  MemoryTag tag() const { return tag_; }

 private:
  Storage(void* data, size_t bytes, MemoryTag tag) : data_(data), bytes_(bytes), tag_(tag) {}
  void* data_;
  size_t bytes_;
  MemoryTag tag_;
};

// Element type of a DType, for data<T>() checks.
template <typename T>
constexpr bool kIsTensorElement = false;
template <>
inline constexpr bool kIsTensorElement<float> = true;
template <>
inline constexpr bool kIsTensorElement<uint16_t> = true;  // bf16 bits
template <>
inline constexpr bool kIsTensorElement<int32_t> = true;

class Tensor {
 public:
  Tensor() = default;  // undefined
  bool defined() const { return storage_ != nullptr; }

  // Uninitialised contents. Aborts if the memory limit is exceeded.
  static Tensor Empty(Shape shape, DType dtype = DType::kF32, MemoryTag tag = MemoryTag::kActivation);
  // As Empty, but returns an error Status instead of aborting when the limit is exceeded.
  static Result<Tensor> TryEmpty(Shape shape, DType dtype = DType::kF32, MemoryTag tag = MemoryTag::kActivation);
  static Tensor Zeros(Shape shape, DType dtype = DType::kF32, MemoryTag tag = MemoryTag::kActivation);
  static Tensor Full(Shape shape, float value, MemoryTag tag = MemoryTag::kActivation);  // fp32
  // Contiguous view of `shape` starting `offset_elems` elements into `storage`.
  static Tensor FromStorage(std::shared_ptr<Storage> storage, int64_t offset_elems, Shape shape,
                            DType dtype = DType::kF32);
  static Tensor FromVector(Shape shape, const std::vector<float>& values, MemoryTag tag = MemoryTag::kActivation);
  static Tensor FromVectorI32(Shape shape, const std::vector<int32_t>& values, MemoryTag tag = MemoryTag::kActivation);

  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }  // in elements
  int64_t dim(int i) const;                          // negative counts from the end
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  size_t element_size() const { return DTypeSize(dtype_); }
  size_t nbytes() const { return static_cast<size_t>(numel_) * element_size(); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  int64_t offset() const { return offset_; }  // in elements
  MemoryTag tag() const;
  std::string ToString() const;  // "Tensor(f32, [2, 3])"

  // Pointer to element 0 of this view. T must match dtype (float/uint16_t/int32_t).
  template <typename T>
  T* data() {
    CheckType<T>();
    return static_cast<T*>(raw());
  }
  template <typename T>
  const T* data() const {
    CheckType<T>();
    return static_cast<const T*>(raw());
  }
  void* raw();
  const void* raw() const;

  // Contiguous reshape sharing storage; at most one dim may be -1. Aborts if not contiguous.
  Tensor View(Shape shape) const;
  // Elements [start, end) of `dim` (negative dim allowed); strided view sharing storage.
  Tensor Slice(int dim, int64_t start, int64_t end) const;
  // Strided view with two dims swapped.
  Tensor Transpose(int d0, int d1) const;
  // This tensor if contiguous, else a contiguous copy.
  Tensor Contiguous() const;
  // A contiguous copy with its own storage (same dtype; tag defaults to this storage's tag).
  Tensor Clone() const;
  Tensor Clone(MemoryTag tag) const;
  // Copies src's values into this tensor (same numel and dtype; any strides on both sides).
  void CopyFrom(const Tensor& src);
  // fp32 or bf16 (rounded) or i32 (truncated).
  void Fill(float value);
  // Values in row-major order as fp32 (bf16 and i32 converted).
  std::vector<float> ToVector() const;
  std::vector<int32_t> ToVectorI32() const;

  // New contiguous tensors with converted values; round-to-nearest-even for bf16.
  Tensor ToBF16() const;
  Tensor ToF32() const;

 private:
  template <typename T>
  void CheckType() const {
    static_assert(kIsTensorElement<T>, "Tensor::data<T>: T must be float, uint16_t or int32_t");
    CheckDType(sizeof(T), std::is_same_v<T, float>     ? DType::kF32
                          : std::is_same_v<T, int32_t> ? DType::kI32
                                                       : DType::kBF16);
  }
  void CheckDType(size_t size, DType want) const;

  std::shared_ptr<Storage> storage_;
  int64_t offset_ = 0;
  Shape shape_;
  Shape strides_;
  int64_t numel_ = 0;
  DType dtype_ = DType::kF32;
};

}  // namespace lockstep::tensor
