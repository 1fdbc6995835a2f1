#include "lockstep/cli/bench_comm_report.h"

#include <cstdio>

#include <nlohmann/json.hpp>

namespace lockstep::cli {
namespace {

bool Reduces(BenchOp op) { return op == BenchOp::kAllreduce || op == BenchOp::kReduceScatter; }

}  // namespace

void BenchReport::BeginTable(BenchOp op) {
  op_ = op;
  busbw_.clear();
  wrong_ = 0;
  if (json_) return;
  std::printf("# lockstep bench-comm: %s, backend %s, %d ranks\n#\n", BenchOpName(op), backend_.c_str(), nproc_);
  const bool mpi = op == BenchOp::kAllreduce;
  std::printf("# %10s %12s %6s %6s %5s %10s %8s %8s %7s%s\n", "size", "count", "type", "redop", "root", "time", "algbw",
              "busbw", "#wrong", mpi ? "  mpi_busbw" : "");
  std::printf("# %10s %12s %6s %6s %5s %10s %8s %8s %7s%s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)",
              "(GB/s)", "", mpi ? "     (GB/s)" : "");
  std::fflush(stdout);
}

void BenchReport::Line(const BenchPoint& p) {
  busbw_.push_back(p.busbw);
  wrong_ += p.wrong;
  const char* redop = Reduces(p.op) ? "sum" : "none";
  if (json_) {
    nlohmann::ordered_json j = {{"op", BenchOpName(p.op)}, {"backend", backend_},  {"nproc", nproc_},
                                {"bytes", p.bytes},        {"count", p.count},     {"type", "f32"},
                                {"redop", redop},          {"root", p.root},       {"iters", p.iters},
                                {"time_us", p.time_us},    {"algbw_gbs", p.algbw}, {"busbw_gbs", p.busbw},
                                {"wrong", p.wrong}};
    if (p.op == BenchOp::kAllreduce) {
      j["mpi_busbw_gbs"] = p.mpi_busbw >= 0 ? nlohmann::ordered_json(p.mpi_busbw) : nlohmann::ordered_json();
    }
    std::printf("%s\n", j.dump().c_str());
  } else {
    char mpi[32] = "";
    if (p.op == BenchOp::kAllreduce) {
      if (p.mpi_busbw >= 0) {
        std::snprintf(mpi, sizeof(mpi), " %10.2f", p.mpi_busbw);
      } else {
        std::snprintf(mpi, sizeof(mpi), " %10s", "n/a");
      }
    }
    std::printf("  %10lld %12lld %6s %6s %5d %10.2f %8.2f %8.2f %7lld%s\n", static_cast<long long>(p.bytes),
                static_cast<long long>(p.count), "f32", redop, p.root, p.time_us, p.algbw, p.busbw,
                static_cast<long long>(p.wrong), mpi);
  }
  std::fflush(stdout);
}

void BenchReport::EndTable() {
  if (json_) return;
  double sum = 0;
  for (double b : busbw_) sum += b;
  std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(wrong_), wrong_ == 0 ? "OK" : "FAILED");
  std::printf("# Avg bus bandwidth    : %.3f GB/s\n#\n", busbw_.empty() ? 0.0 : sum / busbw_.size());
  std::fflush(stdout);
}

}  // namespace lockstep::cli
