#include "lockstep/tensor/memory.h"

#include <cstdio>
#include <cstdlib>

#include <cstdlib>
#include <new>

#include "lockstep/tensor/check.h"

namespace lockstep::tensor {
namespace {

thread_local MemoryTracker* tls_tracker = nullptr;

// Header stored in the 64 bytes before each block: which tracker counted it, and what.
struct BlockHeader {
  MemoryTracker* tracker;
  size_t bytes;
  MemoryTag tag;
  uint32_t magic;
};
static_assert(sizeof(BlockHeader) <= kAlignment);
constexpr uint32_t kMagic = 0x15a11c8d;

void UpdateMax(std::atomic<int64_t>& peak, int64_t v) {
  int64_t p = peak.load(std::memory_order_relaxed);
  while (v > p && !peak.compare_exchange_weak(p, v, std::memory_order_relaxed)) {}
}

}  // namespace

const char* MemoryTagName(MemoryTag tag) {
  switch (tag) {
    case MemoryTag::kParameter:
      return "parameter";
    case MemoryTag::kGradient:
      return "gradient";
    case MemoryTag::kOptimizer:
      return "optimizer";
    case MemoryTag::kActivation:
      return "activation";
    case MemoryTag::kOther:
      return "other";
    case MemoryTag::kParameterCopy:
      return "bf16 parameter copy";
    case MemoryTag::kWorkspace:
      return "workspace";
    case MemoryTag::kContribution:
      return "gradient contribution";
  }
  return "?";
}

int64_t MemoryTracker::Current(MemoryTag tag) const {
  return current_[static_cast<int>(tag)].load(std::memory_order_relaxed);
}
int64_t MemoryTracker::Peak(MemoryTag tag) const {
  return peak_[static_cast<int>(tag)].load(std::memory_order_relaxed);
}
int64_t MemoryTracker::CurrentTotal() const { return total_.load(std::memory_order_relaxed); }
int64_t MemoryTracker::PeakTotal() const { return peak_total_.load(std::memory_order_relaxed); }

void MemoryTracker::ResetPeak() {
  for (int i = 0; i < kNumMemoryTags; ++i) peak_[i].store(current_[i].load());
  peak_total_.store(total_.load());
}

bool MemoryTracker::Reserve(int64_t bytes, MemoryTag tag) {
  int64_t limit = limit_.load(std::memory_order_relaxed);
  int64_t total = total_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  if (limit > 0 && total > limit) {
    total_.fetch_sub(bytes, std::memory_order_relaxed);
    return false;
  }
  int i = static_cast<int>(tag);
  int64_t cur = current_[i].fetch_add(bytes, std::memory_order_relaxed) + bytes;
  UpdateMax(peak_[i], cur);
  UpdateMax(peak_total_, total);
  num_allocs_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void MemoryTracker::Release(int64_t bytes, MemoryTag tag) {
  current_[static_cast<int>(tag)].fetch_sub(bytes, std::memory_order_relaxed);
  total_.fetch_sub(bytes, std::memory_order_relaxed);
}

MemoryTracker* DefaultTracker() {
  static MemoryTracker* t = new MemoryTracker();  // never destroyed: used by late frees
  return t;
}

MemoryTracker* CurrentTracker() { return tls_tracker ? tls_tracker : DefaultTracker(); }
void SetCurrentTracker(MemoryTracker* t) { tls_tracker = t; }

ScopedTracker::ScopedTracker(MemoryTracker* t) : prev_(tls_tracker) { tls_tracker = t; }
ScopedTracker::~ScopedTracker() { tls_tracker = prev_; }

void* AlignedAlloc(size_t bytes, MemoryTag tag) {
  MemoryTracker* tracker = CurrentTracker();
  if (!tracker->Reserve(static_cast<int64_t>(bytes), tag)) return nullptr;
  // Round the size up so aligned_alloc's size-multiple-of-alignment rule holds.
  size_t total = kAlignment + ((bytes + kAlignment - 1) / kAlignment) * kAlignment;
  void* base = std::aligned_alloc(kAlignment, total);
  if (base == nullptr) {
    tracker->Release(static_cast<int64_t>(bytes), tag);
    return nullptr;
  }
  auto* h = static_cast<BlockHeader*>(base);
  h->tracker = tracker;
  h->bytes = bytes;
  h->tag = tag;
  h->magic = kMagic;
  return static_cast<char*>(base) + kAlignment;
}

void AlignedFree(void* p, size_t bytes, MemoryTag tag) {
  if (p == nullptr) return;
  void* base = static_cast<char*>(p) - kAlignment;
  auto* h = static_cast<BlockHeader*>(base);
  LS_CHECK(h->magic == kMagic) << "AlignedFree of a pointer not from AlignedAlloc";
  LS_CHECK(h->bytes == bytes && h->tag == tag)
      << "AlignedFree(" << bytes << ", " << MemoryTagName(tag) << ") of a block allocated as (" << h->bytes << ", "
      << MemoryTagName(h->tag) << ")";
  h->magic = 0;
  h->tracker->Release(static_cast<int64_t>(bytes), tag);
  std::free(base);
}

void ExitIfLimitExceeded(size_t bytes, MemoryTag tag, const char* what) {
  MemoryTracker* t = CurrentTracker();
  if (t->limit() <= 0) return;
  std::fprintf(
      stderr,
      "lockstep: error: out of memory under --mem-limit %.1f MiB: %s needs %.1f MiB more (%s) with %.1f MiB in "
      "use; use a higher --zero, more workers, a smaller batch or a higher limit\n",
      static_cast<double>(t->limit()) / 1048576.0, what, static_cast<double>(bytes) / 1048576.0, MemoryTagName(tag),
      static_cast<double>(t->CurrentTotal()) / 1048576.0);
  std::fflush(stderr);
  std::_Exit(2);
}

}  // namespace lockstep::tensor
