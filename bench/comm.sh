#!/usr/bin/env bash
# The collective figures for the threads backend on 2 ranks, repeated because the machine is
# shared: per run, allreduce busbw at 64 MiB f32 beside plain MPI_Allreduce measured in the
# same `lockstep bench-comm` run (its mpi_busbw column), their ratio, the 8-byte allreduce
# latency, and what the memory system allows for the same traffic without any communicator.
#
# The ceiling probe does exactly the memory traffic of a 2-rank allreduce with no
# communicator at all (each of 2 pinned threads reads its half of both 64 MiB inputs and
# streams the sum to both outputs) and prints it as busbw (64 MiB / time); `memcpy` is one
# thread copying 64 MiB, for scale. It runs right after each bench-comm, but in its own time
# window: on a shared machine "of ceiling" can exceed 100%; read it as "at the ceiling".
#
# Usage: bench/comm.sh [RUNS=5] [BUILD_DIR=build]
set -euo pipefail
runs=${1:-5}
build=${2:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
lockstep="$here/$build/lockstep"
[ -x "$lockstep" ] || { echo "comm.sh: $lockstep not built" >&2; exit 2; }
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/ceiling.cc" <<'EOF'
#include <immintrin.h>
#include <pthread.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
using Clock = std::chrono::steady_clock;
static const size_t kN = size_t{64} << 18;  // floats per buffer: 64 MiB
static float *a0, *a1, *b0, *b1;
static void Pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu % std::max(1u, std::thread::hardware_concurrency()), &s);
  pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}
static void ReduceHalf(size_t b, size_t e) {  // buffers are 64-byte aligned
  for (size_t i = b; i < e; i += 32) {
    __m256 v[4];
    for (int k = 0; k < 4; ++k)
      v[k] = _mm256_add_ps(_mm256_load_ps(a0 + i + 8 * k), _mm256_load_ps(a1 + i + 8 * k));
    for (int k = 0; k < 4; ++k) _mm256_stream_ps(b0 + i + 8 * k, v[k]);
    for (int k = 0; k < 4; ++k) _mm256_stream_ps(b1 + i + 8 * k, v[k]);
  }
  _mm_sfence();
}
static double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
int main() {
  for (float** p : {&a0, &a1, &b0, &b1}) {
    *p = static_cast<float*>(std::aligned_alloc(64, kN * 4));
    for (size_t i = 0; i < kN; ++i) (*p)[i] = static_cast<float>(i % 17);
  }
  std::vector<double> reduce, copy;
  for (int rep = 0; rep < 9; ++rep) {
    // Both threads pinned and spinning until `go`: the time is that of the slower half.
    std::atomic<int> ready{0}, go{0};
    Clock::time_point end[2];
    auto half = [&](int t) {
      Pin(t);
      ready++;
      while (!go.load()) {}
      ReduceHalf(t * kN / 2, (t + 1) * kN / 2);
      end[t] = Clock::now();
    };
    std::thread t0(half, 0), t1(half, 1);
    while (ready.load() < 2) {}
    const auto start = Clock::now();
    go = 1;
    t0.join();
    t1.join();
    const double s = std::chrono::duration<double>(std::max(end[0], end[1]) - start).count();
    reduce.push_back(kN * 4.0 / s / 1e9);
    const auto c0 = Clock::now();
    std::memcpy(b0, a0, kN * 4);
    copy.push_back(kN * 4.0 / std::chrono::duration<double>(Clock::now() - c0).count() / 1e9);
  }
  std::printf("%.2f %.2f\n", Median(reduce), Median(copy));
}
EOF
c++ -O2 -march=x86-64-v3 -std=c++17 -pthread "$tmp/ceiling.cc" -o "$tmp/ceiling"

bench() {  # bench MIN MAX -> the size line of the allreduce table
  "$lockstep" bench-comm --backend threads --nproc 2 --op allreduce --min-bytes "$1" \
    --max-bytes "$2" | grep -v '^#'
}

echo "threads backend, 2 ranks, allreduce f32 sum; GB/s; mpi = MPI_Allreduce in the same run"
printf "%4s %12s %12s %7s %13s %14s %11s %14s\n" run "busbw 64M" "mpi 64M" ratio \
  "8 B lat (us)" "ceiling 64M" "of ceiling" "memcpy 1 thr"
ratios=()
for run in $(seq "$runs"); do
  # Command substitution (not < <(...)) so that a bench-comm failure stops the script, and
  # every row's #wrong must be 0.
  big=$(bench 64M 64M)
  small=$(bench 8 8)
  read -r _ _ _ _ _ _ _ busbw wrong mpi <<<"$big"
  read -r _ _ _ _ _ lat _ _ wrong_small _ <<<"$small"
  if [ "$wrong" != 0 ] || [ "$wrong_small" != 0 ]; then
    echo "comm.sh: bench-comm reported wrong values: $big / $small" >&2
    exit 1
  fi
  read -r ceiling memcpy < <("$tmp/ceiling")
  ratio=$(awk -v a="$busbw" -v b="$mpi" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }')
  share=$(awk -v a="$busbw" -v b="$ceiling" 'BEGIN { printf "%.0f%%", 100 * a / b }')
  ratios+=("$ratio")
  printf "%4d %12s %12s %6sx %13s %14s %11s %14s\n" "$run" "$busbw" "$mpi" "$ratio" "$lat" \
    "$ceiling" "$share" "$memcpy"
done
printf '%s\n' "${ratios[@]}" | sort -g | awk '{ r[NR] = $1 } END {
  printf "ratio threads / MPI_Allreduce at 64 MiB: min %.2fx, median %.2fx, max %.2fx\n",
         r[1], r[int((NR + 1) / 2)], r[NR] }'
