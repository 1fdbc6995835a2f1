#include "lockstep/tensor/threads.h"

#include <omp.h>

#include "lockstep/tensor/check.h"

namespace lockstep::tensor {
namespace {
thread_local bool tls_deterministic = false;
}  // namespace

void SetComputeThreads(int n) {
  LS_CHECK(n >= 1) << "SetComputeThreads(" << n << ")";
  omp_set_num_threads(n);
}

int ComputeThreads() { return omp_get_max_threads(); }

void SetDeterministicCompute(bool on) { tls_deterministic = on; }
bool DeterministicCompute() { return tls_deterministic; }

}  // namespace lockstep::tensor
