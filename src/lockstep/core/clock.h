// Monotonic clocks for timing steps and collective deadlines.
#pragma once

#include <chrono>
#include <cstdint>

namespace lockstep {

inline int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class Stopwatch {
 public:
  Stopwatch() : start_(NowNanos()) {}
  void Reset() { start_ = NowNanos(); }
  double ElapsedMs() const { return (NowNanos() - start_) * 1e-6; }
  double ElapsedSeconds() const { return (NowNanos() - start_) * 1e-9; }

 private:
  int64_t start_;
};

}  // namespace lockstep
