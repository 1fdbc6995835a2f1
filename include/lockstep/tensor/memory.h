// Byte accounting for every tensor buffer, split by what the bytes are for.
// Ranks are threads in one process, so each rank thread installs its own MemoryTracker
// (SetCurrentTracker); a thread that installed none counts into a process-wide default.
// A block remembers the tracker it was counted into, so freeing it on another thread (a
// tensor handed across ranks, a pool thread) still decrements the right tracker.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace lockstep::tensor {

// kParameterCopy: the bf16 copy of the weights that mixed precision makes once per step.
// kWorkspace: buffers a kernel keeps between calls (a convolution plan's operands in oneDNN's
// blocked layouts), sized by the shapes it runs, not by what a step saves.
// kContribution: deterministic mode's per-shard gradient copies (one gradient buffer for each
// canonical shard a rank computes), summed in the fixed tree after the passes.
enum class MemoryTag : uint8_t {
  kParameter,
  kGradient,
  kOptimizer,
  kActivation,
  kOther,
  kParameterCopy,
  kWorkspace,
  kContribution
};
inline constexpr int kNumMemoryTags = 8;
const char* MemoryTagName(MemoryTag tag);

class MemoryTracker {
 public:
  MemoryTracker() = default;
  MemoryTracker(const MemoryTracker&) = delete;
  MemoryTracker& operator=(const MemoryTracker&) = delete;

  // Current and peak live bytes for one tag, and for all tags together.
  int64_t Current(MemoryTag tag) const;
  int64_t Peak(MemoryTag tag) const;
  int64_t CurrentTotal() const;
  int64_t PeakTotal() const;
  // Sets every peak to the current value (e.g. after model set-up, to measure one step).
  void ResetPeak();
  // Number of successful allocations counted so far (all tags).
  int64_t NumAllocations() const { return num_allocs_.load(std::memory_order_relaxed); }

  // Total-byte limit; 0 = unlimited. An allocation that would exceed it fails
  // (AlignedAlloc returns nullptr, Tensor::Empty aborts with a message; callers that
  // want a recoverable error use TryAllocate-style paths).
  void SetLimit(int64_t bytes) { limit_.store(bytes, std::memory_order_relaxed); }
  int64_t limit() const { return limit_.load(std::memory_order_relaxed); }

  // Low-level accounting, used by AlignedAlloc/AlignedFree. Reserve returns false (and
  // counts nothing) when the limit would be exceeded.
  bool Reserve(int64_t bytes, MemoryTag tag);
  void Release(int64_t bytes, MemoryTag tag);

 private:
  std::array<std::atomic<int64_t>, kNumMemoryTags> current_{};
  std::array<std::atomic<int64_t>, kNumMemoryTags> peak_{};
  std::atomic<int64_t> total_{0};
  std::atomic<int64_t> peak_total_{0};
  std::atomic<int64_t> limit_{0};
  std::atomic<int64_t> num_allocs_{0};
};

// The tracker of the calling thread (never null: the process default when none set).
MemoryTracker* CurrentTracker();
// Installs `t` for the calling thread; nullptr restores the process default.
void SetCurrentTracker(MemoryTracker* t);
MemoryTracker* DefaultTracker();

// RAII: installs a tracker for the current scope on this thread.
class ScopedTracker {
 public:
  explicit ScopedTracker(MemoryTracker* t);
  ~ScopedTracker();
  ScopedTracker(const ScopedTracker&) = delete;
  ScopedTracker& operator=(const ScopedTracker&) = delete;

 private:
  MemoryTracker* prev_;
};

// An allocation refused because of the calling thread's tracker limit (--mem-limit) is user
// input, not a lockstep bug: prints one line naming what did not fit and exits with status 2
// (the supervisor does not retry it). Allocation sites sit deep in kernels and autograd, which
// have no error path; this is the one exit below cli/. Returns normally when no limit is set
// (the caller then reports a real out-of-memory as it did before).
void ExitIfLimitExceeded(size_t bytes, MemoryTag tag, const char* what);

inline constexpr size_t kAlignment = 64;

// 64-byte aligned, counted into CurrentTracker() under `tag`. Returns nullptr if the
// tracker's limit would be exceeded or the system is out of memory. bytes == 0 gives a
// valid unique pointer that must still be freed.
void* AlignedAlloc(size_t bytes, MemoryTag tag);
// `bytes` and `tag` must match the AlignedAlloc call (checked); the bytes are released
// from the tracker captured at allocation time.
void AlignedFree(void* p, size_t bytes, MemoryTag tag);

}  // namespace lockstep::tensor
