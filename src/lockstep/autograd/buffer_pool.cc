#include "lockstep/autograd/buffer_pool.h"

#include <cstring>

namespace lockstep::autograd {

using tensor::DType;
using tensor::MemoryTag;
using tensor::Shape;
using tensor::Storage;
using tensor::Tensor;

Tensor BufferPool::Empty(const Shape& shape, DType dtype) {
  size_t bytes = static_cast<size_t>(tensor::NumElements(shape)) * tensor::DTypeSize(dtype);
  // A buffer of this step that only the pool still holds (use_count() == 1 is exact: storages
  // are shared only between tensors of this rank thread).
  for (auto it = in_use_.rbegin(); it != in_use_.rend(); ++it) {
    if ((*it)->bytes() == bytes && it->use_count() == 1) {
      ++reuses_;
      return Tensor::FromStorage(*it, 0, shape, dtype);
    }
  }
  std::shared_ptr<Storage> storage;
  auto it = free_.find(bytes);
  if (it != free_.end() && !it->second.empty()) {
    storage = std::move(it->second.back());
    it->second.pop_back();
    ++reuses_;
  } else {
    storage = Storage::Allocate(bytes, MemoryTag::kActivation);
    if (storage == nullptr) {
      const std::string what = "an activation " + tensor::ShapeToString(shape);
      tensor::ExitIfLimitExceeded(bytes, MemoryTag::kActivation, what.c_str());
    }
    LS_CHECK(storage != nullptr) << "cannot allocate " << bytes << " bytes for activation "
                                 << tensor::ShapeToString(shape);
    ++allocations_;
  }
  in_use_.push_back(storage);
  return Tensor::FromStorage(std::move(storage), 0, shape, dtype);
}

Tensor BufferPool::Zeros(const Shape& shape, DType dtype) {
  Tensor t = Empty(shape, dtype);
  std::memset(t.raw(), 0, t.nbytes());
  return t;
}

void BufferPool::Recycle() {
  // Whatever is still on a free list was not wanted during this step.
  free_.clear();
  std::vector<std::shared_ptr<Storage>> held;
  for (auto& s : in_use_) {
    // use_count() == 1: only the pool holds it. This is exact here, not a race: storages
    // are only shared between tensors of this rank thread.
    if (s.use_count() == 1)
      free_[s->bytes()].push_back(std::move(s));
    else
      held.push_back(std::move(s));
  }
  in_use_ = std::move(held);
}

void BufferPool::Release() {
  free_.clear();
  std::erase_if(in_use_, [](const std::shared_ptr<Storage>& s) { return s.use_count() == 1; });
}

int64_t BufferPool::bytes_held() const {
  int64_t total = 0;
  for (const auto& s : in_use_) total += static_cast<int64_t>(s->bytes());
  for (const auto& [bytes, list] : free_) total += static_cast<int64_t>(bytes * list.size());
  return total;
}

}  // namespace lockstep::autograd
