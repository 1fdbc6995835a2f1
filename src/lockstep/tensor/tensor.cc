#include "lockstep/tensor/tensor.h"

#include <cstring>
#include <sstream>

namespace lockstep::tensor {

int64_t NumElements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    LS_CHECK(d >= 0) << "negative dimension in " << ShapeToString(s);
    n *= d;
  }
  return n;
}

std::string ShapeToString(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

namespace {
Shape ContiguousStrides(const Shape& shape) {
  Shape st(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = s;
    s *= shape[i];
  }
  return st;
}
}  // namespace

std::shared_ptr<Storage> Storage::Allocate(size_t bytes, MemoryTag tag) {
  void* p = AlignedAlloc(bytes, tag);
  if (p == nullptr) return nullptr;
  return std::shared_ptr<Storage>(new Storage(p, bytes, tag));
}

Storage::~Storage() { AlignedFree(data_, bytes_, tag_); }

Result<Tensor> Tensor::TryEmpty(Shape shape, DType dtype, MemoryTag tag) {
  if (dtype != DType::kF32 && dtype != DType::kBF16 && dtype != DType::kI32)
    return Status::InvalidArgument(std::string("a tensor holds f32, bf16 or i32, not ") + DTypeName(dtype));
  int64_t n = NumElements(shape);
  size_t bytes = static_cast<size_t>(n) * DTypeSize(dtype);
  auto storage = Storage::Allocate(bytes, tag);
  if (storage == nullptr) {
    MemoryTracker* t = CurrentTracker();
    std::ostringstream os;
    os << "cannot allocate " << bytes << " bytes for a " << MemoryTagName(tag) << " tensor " << ShapeToString(shape)
       << ": " << t->CurrentTotal() << " bytes in use";
    if (t->limit() > 0) os << ", limit " << t->limit();
    return Status(StatusCode::kAborted, os.str());
  }
  Tensor t;
  t.storage_ = std::move(storage);
  t.offset_ = 0;
  t.strides_ = ContiguousStrides(shape);
  t.shape_ = std::move(shape);
  t.numel_ = n;
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::Empty(Shape shape, DType dtype, MemoryTag tag) {
  Result<Tensor> r = TryEmpty(shape, dtype, tag);
  if (!r.ok()) {
    const std::string what = "a tensor " + ShapeToString(shape);
    ExitIfLimitExceeded(static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype), tag, what.c_str());
  }
  LS_CHECK(r.ok()) << r.status().message();
  return std::move(r).value();
}

Tensor Tensor::Zeros(Shape shape, DType dtype, MemoryTag tag) {
  Tensor t = Empty(std::move(shape), dtype, tag);
  std::memset(t.raw(), 0, t.nbytes());
  return t;
}

Tensor Tensor::Full(Shape shape, float value, MemoryTag tag) {
  Tensor t = Empty(std::move(shape), DType::kF32, tag);
  t.Fill(value);
  return t;
}

Tensor Tensor::FromStorage(std::shared_ptr<Storage> storage, int64_t offset_elems, Shape shape, DType dtype) {
  LS_CHECK(storage != nullptr) << "FromStorage(null)";
  int64_t n = NumElements(shape);
  size_t es = DTypeSize(dtype);
  LS_CHECK(offset_elems >= 0 && static_cast<size_t>(offset_elems + n) * es <= storage->bytes())
      << "view " << ShapeToString(shape) << " at element " << offset_elems << " exceeds storage of " << storage->bytes()
      << " bytes";
  Tensor t;
  t.storage_ = std::move(storage);
  t.offset_ = offset_elems;
  t.strides_ = ContiguousStrides(shape);
  t.shape_ = std::move(shape);
  t.numel_ = n;
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::FromVector(Shape shape, const std::vector<float>& values, MemoryTag tag) {
  LS_CHECK(NumElements(shape) == static_cast<int64_t>(values.size()))
      << "FromVector: shape " << ShapeToString(shape) << " vs " << values.size() << " values";
  Tensor t = Empty(std::move(shape), DType::kF32, tag);
  if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * sizeof(float));
  return t;
}

Tensor Tensor::FromVectorI32(Shape shape, const std::vector<int32_t>& values, MemoryTag tag) {
  LS_CHECK(NumElements(shape) == static_cast<int64_t>(values.size()))
      << "FromVectorI32: shape " << ShapeToString(shape) << " vs " << values.size() << " values";
  Tensor t = Empty(std::move(shape), DType::kI32, tag);
  if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * sizeof(int32_t));
  return t;
}

int64_t Tensor::dim(int i) const {
  int n = ndim();
  int j = i < 0 ? i + n : i;
  LS_CHECK(j >= 0 && j < n) << "dim(" << i << ") of " << ToString();
  return shape_[j];
}

bool Tensor::is_contiguous() const {
  int64_t s = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] != 1 && strides_[i] != s) return false;
    s *= shape_[i];
  }
  return true;
}

MemoryTag Tensor::tag() const {
  LS_CHECK(defined()) << "tag() of an undefined tensor";
  return storage_->tag();
}

std::string Tensor::ToString() const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream os;
  os << "Tensor(" << DTypeName(dtype_) << ", " << ShapeToString(shape_) << ")";
  return os.str();
}

void* Tensor::raw() {
  LS_CHECK(defined()) << "data of an undefined tensor";
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(element_size());
}

const void* Tensor::raw() const {
  LS_CHECK(defined()) << "data of an undefined tensor";
  return static_cast<const char*>(storage_->data()) + offset_ * static_cast<int64_t>(element_size());
}

void Tensor::CheckDType(size_t size, DType want) const {
  LS_CHECK(dtype_ == want) << "data<" << DTypeName(want) << ">() of " << ToString();
  (void)size;
}

}  // namespace lockstep::tensor
