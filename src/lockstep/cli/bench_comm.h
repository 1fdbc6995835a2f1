// `lockstep bench-comm`: collective bandwidth and latency in the style of nccl-tests
// (one small table per collective: size count type redop root | time algbw busbw #wrong),
// for the threads backend (ranks as threads of this process), the mpi backend (this
// executable relaunched under mpirun) or the hierarchical one (a process a host, threads inside). Inputs are small integers in f32, so every result is
// exact and checked after the timed loop; any wrong value makes the exit status 1.
// busbw = algbw x 2(n-1)/n for allreduce, (n-1)/n for reduce-scatter and all-gather, 1 for
// broadcast. For allreduce the table also shows `mpi_busbw`: plain MPI_Allreduce on the same
// sizes and ranks, measured in the same run (with --backend threads, by a short mpirun child
// job before the threads measurements; "n/a" when mpirun is unavailable).
#pragma once

#include <cstdint>
#include <string>

namespace lockstep::cli {

struct BenchCommArgs {
  std::string backend = "threads";  // "threads", "mpi" or "hier"
  int nproc = 2;
  int workers_per_host = 1;  // hier: worker threads in each process (nproc / this many processes)
  std::string op = "allreduce";  // allreduce, reduce_scatter, all_gather, broadcast, all
  int64_t min_bytes = 8;
  int64_t max_bytes = 64 << 20;
  bool json = false;  // one JSON object per size line instead of the table
  int iters = 0;      // timed iterations per size; 0: chosen by size (1000 down to 5)
  // --hosts H:N,...: across these hosts (mpirun with a hostfile of them); the backend is hier
  // (one process a host, N workers each) unless --backend mpi (N processes a host). --nproc
  // defaults to every slot. --mpi-if: the interface (default: the one on the hosts' subnet).
  std::string hosts;
  std::string mpi_interface;
  bool nproc_given = false;
};

// Runs the benchmark; returns the exit status (0, 1 on a wrong value or failed collective,
// 2 on bad arguments, one line). argc/argv are main's, unchanged: with --backend mpi outside mpirun
// the program re-executes itself under `mpirun -np nproc` with them.
int RunBenchComm(const BenchCommArgs& args, int argc, char** argv);

}  // namespace lockstep::cli
