// WaitWord: a 32-bit word that threads wait on by spinning for a bounded time and then
// sleeping in futex(2), so ranks-as-threads do not burn every core when oversubscribed, yet a
// peer that arrives within the spin window is seen within ~100 ns.
//
// Protocol (Dekker-style, all seq_cst): a signaller first changes the state the waiter's
// predicate reads, then calls Bump(), which increments the word and wakes sleepers only if a
// waiter registered itself; a waiter registers, re-reads the word and sleeps only if it did
// not change. So wakes are never lost and an uncontended Bump() makes no system call.
#pragma once

#include <atomic>
#include <cstdint>

#include "lockstep/core/clock.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace lockstep::comm::threads {

inline void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns);
void FutexWakeAll(std::atomic<uint32_t>* word);

struct alignas(64) WaitWord {
  std::atomic<uint32_t> value{0};
  std::atomic<uint32_t> sleepers{0};

  // value = v (for counters that carry meaning), then wake.
  void Publish(uint32_t v) {
    value.store(v, std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_seq_cst) != 0) FutexWakeAll(&value);
  }
  void Bump() {
    value.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_seq_cst) != 0) FutexWakeAll(&value);
  }
};

// Waits until pred() is true (returns true) or NowNanos() >= deadline_ns (returns false,
// after one last check of pred). Spins for up to spin_ns first. `word` must be bumped by
// whoever makes pred() true.
template <typename Pred>
bool WaitFor(WaitWord& word, Pred&& pred, int64_t deadline_ns, int64_t spin_ns) {
  if (pred()) return true;
  const int64_t start = NowNanos();
  const int64_t spin_end = start + spin_ns;
  for (uint32_t i = 1;; ++i) {
    if (pred()) return true;
    CpuRelax();
    if ((i & 63) == 0) {
      int64_t now = NowNanos();
      if (now >= spin_end || now >= deadline_ns) break;
    }
  }
  constexpr int64_t kMaxSleepNs = 50'000'000;  // re-check the deadline at least every 50 ms
  while (true) {
    uint32_t seen = word.value.load(std::memory_order_seq_cst);
    if (pred()) return true;
    int64_t now = NowNanos();
    if (now >= deadline_ns) return pred();
    word.sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (word.value.load(std::memory_order_seq_cst) == seen && !pred()) {
      int64_t wait = deadline_ns - now;
      FutexWait(&word.value, seen, wait < kMaxSleepNs ? wait : kMaxSleepNs);
    }
    word.sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
}

constexpr int64_t kNoDeadline = INT64_MAX;

}  // namespace lockstep::comm::threads
