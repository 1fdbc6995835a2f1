#include "lockstep/cli/bench_comm_measure.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "lockstep/comm/mpi/mpi_communicator.h"
#include "lockstep/core/clock.h"

namespace lockstep::cli {
namespace {

using comm::Communicator;
using comm::DType;
using comm::ReduceOp;

// Rank r's input element i: a small integer, so sums over any number of ranks are exact.
float Input(int rank, int64_t i) { return static_cast<float>(rank + 1 + i % 17); }

float SumOverRanks(int n, int64_t i) { return static_cast<float>(n * (n + 1) / 2 + n * (i % 17)); }

// The slowest rank's value (max over ranks), on every rank.
Result<int64_t> MaxOverRanks(Communicator& c, int64_t v) {
  LS_RETURN_IF_ERROR(c.Allreduce(&v, &v, 1, DType::kI64, ReduceOp::kMax)->Wait());
  return v;
}

// Runs `one()` for warm-up and then `iters` times; returns us per iteration (slowest rank).
template <typename F>
Result<double> TimeLoop(Communicator& c, int iters, F one) {
  const int warmup = std::max(1, std::min(iters / 10, 20));
  for (int i = 0; i < warmup; ++i) LS_RETURN_IF_ERROR(one());
  LS_RETURN_IF_ERROR(c.Barrier()->Wait());
  const int64_t t0 = NowNanos();
  for (int i = 0; i < iters; ++i) LS_RETURN_IF_ERROR(one());
  LS_ASSIGN_OR_RETURN(int64_t ns, MaxOverRanks(c, NowNanos() - t0));
  return static_cast<double>(ns) / 1e3 / iters;
}

}  // namespace

const char* BenchOpName(BenchOp op) {
  switch (op) {
    case BenchOp::kAllreduce:
      return "allreduce";
    case BenchOp::kReduceScatter:
      return "reduce_scatter";
    case BenchOp::kAllGather:
      return "all_gather";
    case BenchOp::kBroadcast:
      return "broadcast";
  }
  return "?";
}

double BusFactor(BenchOp op, int n) {
  switch (op) {
    case BenchOp::kAllreduce:
      return 2.0 * (n - 1) / n;
    case BenchOp::kReduceScatter:
    case BenchOp::kAllGather:
      return static_cast<double>(n - 1) / n;
    case BenchOp::kBroadcast:
      return 1.0;
  }
  return 1.0;
}

std::vector<int64_t> BenchSizes(BenchOp op, int n, int64_t min_bytes, int64_t max_bytes) {
  const int64_t unit =
      static_cast<int64_t>(sizeof(float)) * (op == BenchOp::kReduceScatter || op == BenchOp::kAllGather ? n : 1);
  std::vector<int64_t> sizes;
  for (int64_t b = std::max<int64_t>(min_bytes, 1); b <= max_bytes; b *= 2) {
    int64_t s = std::max(unit, b / unit * unit);
    if (sizes.empty() || sizes.back() != s) sizes.push_back(s);
    if (b > (int64_t{1} << 61)) break;
  }
  return sizes;
}

int AutoIters(int64_t bytes) {
  const int64_t target = int64_t{256} << 20;
  return static_cast<int>(std::clamp<int64_t>(target / std::max<int64_t>(bytes, 1), 5, 1000));
}

Result<BenchPoint> MeasurePoint(Communicator& c, BenchOp op, int64_t bytes, int iters) {
  const int n = c.size(), r = c.rank();
  BenchPoint p;
  p.op = op;
  p.bytes = bytes;
  p.count = bytes / static_cast<int64_t>(sizeof(float));
  p.iters = iters;
  const int64_t count = p.count;
  const int64_t block = op == BenchOp::kReduceScatter || op == BenchOp::kAllGather ? count / n : count;
  std::vector<float> send, recv, want;
  std::function<Status()> one;
  switch (op) {
    case BenchOp::kAllreduce:
      send.resize(count);
      recv.assign(count, -1.0f);
      want.resize(count);
      for (int64_t i = 0; i < count; ++i) send[i] = Input(r, i), want[i] = SumOverRanks(n, i);
      one = [&] { return c.Allreduce(send.data(), recv.data(), count, DType::kF32, ReduceOp::kSum)->Wait(); };
      break;
    case BenchOp::kReduceScatter:
      send.resize(count);
      recv.assign(block, -1.0f);
      want.resize(block);
      for (int64_t i = 0; i < count; ++i) send[i] = Input(r, i);
      for (int64_t i = 0; i < block; ++i) want[i] = SumOverRanks(n, r * block + i);
      one = [&] { return c.ReduceScatter(send.data(), recv.data(), block, DType::kF32, ReduceOp::kSum)->Wait(); };
      break;
    case BenchOp::kAllGather:
      send.resize(block);
      recv.assign(count, -1.0f);
      want.resize(count);
      for (int64_t i = 0; i < block; ++i) send[i] = Input(r, i);
      for (int q = 0; q < n; ++q) {
        for (int64_t i = 0; i < block; ++i) want[q * block + i] = Input(q, i);
      }
      one = [&] { return c.AllGather(send.data(), recv.data(), block, DType::kF32)->Wait(); };
      break;
    case BenchOp::kBroadcast:
      p.root = 0;
      recv.assign(count, -1.0f);
      want.resize(count);
      for (int64_t i = 0; i < count; ++i) want[i] = Input(0, i);
      if (r == 0) recv = want;
      one = [&] { return c.Broadcast(recv.data(), count, DType::kF32, 0)->Wait(); };
      break;
  }
  LS_ASSIGN_OR_RETURN(p.time_us, TimeLoop(c, iters, one));
  int64_t wrong = 0;
  for (size_t i = 0; i < want.size(); ++i) wrong += std::memcmp(&recv[i], &want[i], sizeof(float)) != 0;
  LS_RETURN_IF_ERROR(c.Allreduce(&wrong, &wrong, 1, DType::kI64, ReduceOp::kSum)->Wait());
  p.wrong = wrong;
  p.algbw = static_cast<double>(bytes) / (p.time_us * 1e-6) / 1e9;
  p.busbw = p.algbw * BusFactor(op, n);
  return p;
}

Result<double> MeasureNativeMpiAllreduceUs(Communicator& c, int64_t bytes, int iters) {
  const int64_t count = bytes / static_cast<int64_t>(sizeof(float));
  std::vector<float> send(count), recv(count);
  for (int64_t i = 0; i < count; ++i) send[i] = Input(c.rank(), i);
  return TimeLoop(c, iters, [&] {
    return comm::NativeMpiAllreduce(c, send.data(), recv.data(), count, DType::kF32, ReduceOp::kSum);
  });
}

}  // namespace lockstep::cli
