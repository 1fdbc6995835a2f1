// Output of bench-comm: nccl-tests-style tables or JSON lines. Internal to cli/.
#pragma once

#include <string>
#include <vector>

#include "lockstep/cli/bench_comm_measure.h"

namespace lockstep::cli {

class BenchReport {
 public:
  BenchReport(std::string backend, int nproc, bool json) : backend_(std::move(backend)), nproc_(nproc), json_(json) {}

  void BeginTable(BenchOp op);
  void Line(const BenchPoint& p);
  void EndTable();

 private:
  std::string backend_;
  int nproc_;
  bool json_;
  BenchOp op_ = BenchOp::kAllreduce;
  std::vector<double> busbw_;
  int64_t wrong_ = 0;
};

}  // namespace lockstep::cli
