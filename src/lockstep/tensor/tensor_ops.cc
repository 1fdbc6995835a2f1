// Tensor views, copies and dtype conversions.
#include <cstring>

#include "lockstep/core/bf16.h"
#include "lockstep/tensor/tensor.h"

namespace lockstep::tensor {
namespace {

// Calls fn(offset_a, offset_b, len, stride_a, stride_b) for every innermost row of `shape`,
// in row-major order, with element offsets computed from each side's strides.
template <typename Fn>
void ForEachRow(const Shape& shape, const Shape& sa, const Shape& sb, Fn fn) {
  int nd = static_cast<int>(shape.size());
  if (nd == 0) {
    fn(int64_t{0}, int64_t{0}, int64_t{1}, int64_t{1}, int64_t{1});
    return;
  }
  for (int64_t d : shape)
    if (d == 0) return;
  int64_t len = shape[nd - 1];
  std::vector<int64_t> idx(nd, 0);
  int64_t oa = 0, ob = 0;
  while (true) {
    fn(oa, ob, len, sa[nd - 1], sb[nd - 1]);
    int d = nd - 2;
    while (d >= 0) {
      ++idx[d];
      oa += sa[d];
      ob += sb[d];
      if (idx[d] < shape[d]) break;
      oa -= sa[d] * shape[d];
      ob -= sb[d] * shape[d];
      idx[d] = 0;
      --d;
    }
    if (d < 0) return;
  }
}

template <typename T>
void StridedCopy(T* dst, const Shape& sd, const T* src, const Shape& ss, const Shape& shape) {
  ForEachRow(shape, sd, ss, [&](int64_t od, int64_t os, int64_t len, int64_t std_, int64_t sts) {
    T* d = dst + od;
    const T* s = src + os;
    if (std_ == 1 && sts == 1) {
      std::memcpy(d, s, len * sizeof(T));
    } else {
      for (int64_t i = 0; i < len; ++i) d[i * std_] = s[i * sts];
    }
  });
}

void CopyRaw(void* dst, const Shape& sd, const void* src, const Shape& ss, const Shape& shape, size_t es) {
  if (es == 4) {
    StridedCopy(static_cast<uint32_t*>(dst), sd, static_cast<const uint32_t*>(src), ss, shape);
  } else {
    StridedCopy(static_cast<uint16_t*>(dst), sd, static_cast<const uint16_t*>(src), ss, shape);
  }
}

}  // namespace

Tensor Tensor::View(Shape shape) const {
  LS_CHECK(defined()) << "View of an undefined tensor";
  LS_CHECK(is_contiguous()) << "View of non-contiguous " << ToString() << " (call Contiguous())";
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      LS_CHECK(infer < 0) << "View " << ShapeToString(shape) << ": more than one -1";
      infer = static_cast<int>(i);
    } else {
      LS_CHECK(shape[i] >= 0) << "View " << ShapeToString(shape);
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    LS_CHECK(known > 0 && numel_ % known == 0) << "View " << ShapeToString(shape) << " of " << ToString();
    shape[infer] = numel_ / known;
  }
  LS_CHECK(NumElements(shape) == numel_) << "View " << ShapeToString(shape) << " of " << ToString();
  return FromStorage(storage_, offset_, std::move(shape), dtype_);
}

Tensor Tensor::Slice(int dim, int64_t start, int64_t end) const {
  int n = ndim();
  int d = dim < 0 ? dim + n : dim;
  LS_CHECK(d >= 0 && d < n) << "Slice dim " << dim << " of " << ToString();
  LS_CHECK(0 <= start && start <= end && end <= shape_[d])
      << "Slice [" << start << ", " << end << ") of dim " << dim << " of " << ToString();
  Tensor t = *this;
  t.offset_ = offset_ + start * strides_[d];
  t.shape_[d] = end - start;
  t.numel_ = NumElements(t.shape_);
  return t;
}

Tensor Tensor::Transpose(int d0, int d1) const {
  int n = ndim();
  int a = d0 < 0 ? d0 + n : d0, b = d1 < 0 ? d1 + n : d1;
  LS_CHECK(a >= 0 && a < n && b >= 0 && b < n) << "Transpose(" << d0 << ", " << d1 << ") of " << ToString();
  Tensor t = *this;
  std::swap(t.shape_[a], t.shape_[b]);
  std::swap(t.strides_[a], t.strides_[b]);
  return t;
}

Tensor Tensor::Contiguous() const {
  if (is_contiguous()) return *this;
  return Clone();
}

Tensor Tensor::Clone() const { return Clone(tag()); }

Tensor Tensor::Clone(MemoryTag tag) const {
  Tensor t = Empty(shape_, dtype_, tag);
  t.CopyFrom(*this);
  return t;
}

void Tensor::CopyFrom(const Tensor& src) {
  LS_CHECK(defined() && src.defined()) << "CopyFrom with an undefined tensor";
  LS_CHECK(numel_ == src.numel_ && dtype_ == src.dtype_) << "CopyFrom " << src.ToString() << " into " << ToString();
  if (numel_ == 0) return;
  if (is_contiguous() && src.is_contiguous()) {
    std::memmove(raw(), src.raw(), nbytes());
    return;
  }
  if (shape_ == src.shape_) {
    CopyRaw(raw(), strides_, src.raw(), src.strides_, shape_, element_size());
    return;
  }
  // Different shapes, same numel: walk both in row-major order through contiguous copies.
  Tensor s = src.Contiguous();
  Shape cs(shape_.size());
  int64_t st = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    cs[i] = st;
    st *= shape_[i];
  }
  CopyRaw(raw(), strides_, s.raw(), cs, shape_, element_size());
}

void Tensor::Fill(float value) {
  LS_CHECK(defined()) << "Fill of an undefined tensor";
  Tensor c = is_contiguous() ? *this : Empty(shape_, dtype_, MemoryTag::kOther);
  int64_t n = numel_;
  switch (dtype_) {
    case DType::kF32: {
      float* p = c.data<float>();
      for (int64_t i = 0; i < n; ++i) p[i] = value;
      break;
    }
    case DType::kBF16: {
      uint16_t v = F32ToBf16(value);
      uint16_t* p = c.data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = v;
      break;
    }
    case DType::kI32: {
      int32_t v = static_cast<int32_t>(value);
      int32_t* p = c.data<int32_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = v;
      break;
    }
    case DType::kI64:
    case DType::kU8:
      LS_CHECK(false) << "a tensor of " << DTypeName(dtype_);  // TryEmpty makes none
  }
  if (!is_contiguous()) CopyFrom(c);
}

std::vector<float> Tensor::ToVector() const {
  LS_CHECK(defined()) << "ToVector of an undefined tensor";
  Tensor c = Contiguous();
  std::vector<float> out(numel_);
  switch (dtype_) {
    case DType::kF32:
      if (numel_) std::memcpy(out.data(), c.raw(), nbytes());
      break;
    case DType::kBF16:
      Bf16ToF32(c.data<uint16_t>(), out.data(), numel_);
      break;
    case DType::kI32: {
      const int32_t* p = c.data<int32_t>();
      for (int64_t i = 0; i < numel_; ++i) out[i] = static_cast<float>(p[i]);
      break;
    }
    case DType::kI64:
    case DType::kU8:
      LS_CHECK(false) << "a tensor of " << DTypeName(dtype_);  // TryEmpty makes none
  }
  return out;
}

std::vector<int32_t> Tensor::ToVectorI32() const {
  LS_CHECK(defined() && dtype_ == DType::kI32) << "ToVectorI32 of " << ToString();
  Tensor c = Contiguous();
  std::vector<int32_t> out(numel_);
  if (numel_) std::memcpy(out.data(), c.raw(), nbytes());
  return out;
}

Tensor Tensor::ToBF16() const {
  LS_CHECK(defined()) << "ToBF16 of an undefined tensor";
  if (dtype_ == DType::kBF16) return Clone();
  LS_CHECK(dtype_ == DType::kF32) << "ToBF16 of " << ToString();
  Tensor c = Contiguous();
  Tensor out = Empty(shape_, DType::kBF16, tag());
  F32ToBf16(c.data<float>(), out.data<uint16_t>(), numel_);
  return out;
}

Tensor Tensor::ToF32() const {
  LS_CHECK(defined()) << "ToF32 of an undefined tensor";
  if (dtype_ == DType::kF32) return Clone();
  Tensor out = Empty(shape_, DType::kF32, tag());
  if (dtype_ == DType::kBF16) {
    Tensor c = Contiguous();
    Bf16ToF32(c.data<uint16_t>(), out.data<float>(), numel_);
  } else {
    std::vector<float> v = ToVector();
    if (numel_) std::memcpy(out.raw(), v.data(), nbytes());
  }
  return out;
}

}  // namespace lockstep::tensor
