// Compute-thread control for kernels. Ranks are threads in one process; OpenMP's nthreads
// ICV is per thread, so each rank thread sets its own count and its parallel regions use it.
//
// Deterministic mode (thread_local): every kernel gives bit-identical results whatever the
// compute thread count. Kernels only ever split independent output rows across threads;
// reductions are never split in deterministic mode (GEMM runs per row-block of M, each
// block single-threaded, with fixed block boundaries independent of the thread count).
#pragma once

namespace lockstep::tensor {

// Sets the OpenMP thread count for parallel regions started by the calling thread (n >= 1).
void SetComputeThreads(int n);
int ComputeThreads();

void SetDeterministicCompute(bool on);
bool DeterministicCompute();

// RAII helpers for tests and per-rank set-up.
class ScopedComputeThreads {
 public:
  explicit ScopedComputeThreads(int n) : prev_(ComputeThreads()) { SetComputeThreads(n); }
  ~ScopedComputeThreads() { SetComputeThreads(prev_); }

 private:
  int prev_;
};

class ScopedDeterministic {
 public:
  explicit ScopedDeterministic(bool on) : prev_(DeterministicCompute()) { SetDeterministicCompute(on); }
  ~ScopedDeterministic() { SetDeterministicCompute(prev_); }

 private:
  bool prev_;
};

}  // namespace lockstep::tensor
