// BufferPool: reuses activation buffers from one training step to the next.
//
// A step allocates the same sequence of buffer sizes every time, and fresh multi-megabyte
// allocations come from mmap and cost a page fault per 4 KiB on first touch (tens of ms a
// step for gpt-tiny). The pool hands out Tensors over storages it keeps; Recycle() (called
// by Tape::Clear at the end of a step) returns the ones nobody else still holds to free
// lists keyed by exact byte size, so the next step gets the same, already-mapped buffers.
//
// Within a step, a buffer handed out earlier that nobody holds any more is reused at once:
// the tape releases each op's captured activations as soon as its backward has run, so
// backward's gradient buffers take the memory of the forward activations they replace and a
// step peaks at about its forward activations, not forward plus backward; in no-grad mode
// (evaluation) nothing is captured and a forward pass needs only a few layers' buffers.
//
// A buffer that is still referenced outside the pool at Recycle() time (say the loss
// Variable the trainer keeps, a pipeline stage's input and output) stays in use: it is
// handed out again only once its last outside owner has let go (use_count() == 1), so never
// while someone else uses it, and the next step gets the same, already-mapped memory instead
// of a fresh allocation (which glibc may map anew: a page fault per 4 KiB, every step). Free buffers
// that were not asked for again during a whole step are released at the next Recycle(),
// so the pool holds at most about one step's worth of memory even when shapes change
// (text generation grows the sequence by one token a step).
//
// Buffers are counted in the memory tracker current at allocation time, under
// MemoryTag::kActivation, for as long as the pool holds them. Not thread-safe: one pool
// per tape, one tape per rank thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "lockstep/tensor/tensor.h"

namespace lockstep::autograd {

class BufferPool {
 public:
  BufferPool() = default;
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // Contiguous tensor, contents uninitialised (whatever the previous step left there).
  tensor::Tensor Empty(const tensor::Shape& shape, tensor::DType dtype = tensor::DType::kF32);
  // As Empty, zero-filled.
  tensor::Tensor Zeros(const tensor::Shape& shape, tensor::DType dtype = tensor::DType::kF32);

  // End of a step: buffers handed out and no longer referenced elsewhere become free;
  // free buffers not reused since the previous Recycle() are released.
  void Recycle();
  // End of training: every buffer nobody else holds goes back to the system now, so what
  // runs after the last step (gathering the final weights, the sample) has that memory.
  void Release();

  // Bytes of storage the pool references (in use + free).
  int64_t bytes_held() const;
  // Number of Empty/Zeros calls served from a free list / by a new allocation.
  int64_t reuses() const { return reuses_; }
  int64_t allocations() const { return allocations_; }

 private:
  std::vector<std::shared_ptr<tensor::Storage>> in_use_;
  std::unordered_map<size_t, std::vector<std::shared_ptr<tensor::Storage>>> free_;
  int64_t reuses_ = 0;
  int64_t allocations_ = 0;
};

}  // namespace lockstep::autograd
