#include "lockstep/cli/bench_comm.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/cli/bench_comm_measure.h"
#include "lockstep/cli/bench_comm_report.h"
#include "lockstep/comm/hier/hier_world.h"
#include "lockstep/comm/mpi/launch.h"
#include "lockstep/comm/mpi/mpi_communicator.h"
#include "lockstep/comm/threads/threads_world.h"
#include "lockstep/runtime/setup/hosts.h"

namespace lockstep::cli {
namespace {

using comm::Communicator;

// Set in the environment of the mpirun child job that measures the MPI_Allreduce baseline
// for a --backend threads run.
constexpr const char* kBaselineEnv = "LOCKSTEP_BENCH_COMM_MPI_BASELINE";

bool ParseOps(const std::string& name, std::vector<BenchOp>* ops) {
  const BenchOp all[] = {BenchOp::kAllreduce, BenchOp::kReduceScatter, BenchOp::kAllGather, BenchOp::kBroadcast};
  for (BenchOp op : all) {
    if (name == "all" || name == BenchOpName(op)) ops->push_back(op);
  }
  return !ops->empty();
}

int ItersFor(const BenchCommArgs& args, int64_t bytes) { return args.iters > 0 ? args.iters : AutoIters(bytes); }

// Allreduce baseline: bytes -> MPI_Allreduce busbw (GB/s).
using Baseline = std::map<int64_t, double>;

// One rank's part of the whole benchmark. `report` is non-null on rank 0 only.
// `baseline` (threads) gives mpi_busbw; with `measure_native` (mpi) it is measured here.
Status RunRank(Communicator& c, const BenchCommArgs& args, const std::vector<BenchOp>& ops, const Baseline* baseline,
               bool measure_native, BenchReport* report, int64_t* wrong) {
  for (BenchOp op : ops) {
    if (report) report->BeginTable(op);
    for (int64_t bytes : BenchSizes(op, c.size(), args.min_bytes, args.max_bytes)) {
      const int iters = ItersFor(args, bytes);
      LS_ASSIGN_OR_RETURN(BenchPoint p, MeasurePoint(c, op, bytes, iters));
      if (op == BenchOp::kAllreduce && measure_native) {
        LS_ASSIGN_OR_RETURN(double us, MeasureNativeMpiAllreduceUs(c, bytes, iters));
        p.mpi_busbw = static_cast<double>(bytes) / (us * 1e-6) / 1e9 * BusFactor(op, c.size());
      } else if (op == BenchOp::kAllreduce && baseline != nullptr) {
        auto it = baseline->find(bytes);
        if (it != baseline->end()) p.mpi_busbw = it->second;
      }
      *wrong += p.wrong;
      if (report) report->Line(p);
    }
    if (report) report->EndTable();
  }
  return Status::Ok();
}

// Inside mpirun, as the baseline child of a threads run: MPI_Allreduce only, one JSON line
// per size on rank 0's stdout (read by the parent).
int RunBaselineJob(const BenchCommArgs& args) {
  auto c = comm::CreateMpiCommunicator();
  if (!c.ok()) {
    std::fprintf(stderr, "lockstep: error: %s\n", c.status().message().c_str());
    return 1;
  }
  for (int64_t bytes : BenchSizes(BenchOp::kAllreduce, (*c)->size(), args.min_bytes, args.max_bytes)) {
    auto us = MeasureNativeMpiAllreduceUs(**c, bytes, ItersFor(args, bytes));
    if (!us.ok()) {
      std::fprintf(stderr, "lockstep: error: %s\n", us.status().message().c_str());
      comm::AbortMpi(1);
    }
    if ((*c)->rank() == 0) {
      std::printf("%s\n", nlohmann::json({{"bytes", bytes}, {"time_us", *us}}).dump().c_str());
    }
  }
  std::fflush(stdout);
  return 0;
}

Baseline MeasureBaselineUnderMpirun(const BenchCommArgs& args, int argc, char** argv) {
  Baseline baseline;
  std::string out;
  int rc = comm::RunUnderMpirun(comm::MpirunSetup::FromEnvironment(), args.nproc, argc, argv, {},
                                {std::string(kBaselineEnv) + "=1"}, &out);
  if (rc != 0) {
    std::fprintf(stderr,
                 "lockstep: warning: MPI_Allreduce baseline (mpirun) failed with status "
                 "%d; mpi_busbw is n/a\n",
                 rc);
    return baseline;
  }
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("bytes") || !j.contains("time_us")) continue;
    const int64_t bytes = j["bytes"].get<int64_t>();
    const double us = j["time_us"].get<double>();
    baseline[bytes] = static_cast<double>(bytes) / (us * 1e-6) / 1e9 * BusFactor(BenchOp::kAllreduce, args.nproc);
  }
  return baseline;
}

int RunThreads(const BenchCommArgs& args, const std::vector<BenchOp>& ops, int argc, char** argv) {
  Baseline baseline;
  bool has_allreduce = false;
  for (BenchOp op : ops) has_allreduce = has_allreduce || op == BenchOp::kAllreduce;
  if (has_allreduce) baseline = MeasureBaselineUnderMpirun(args, argc, argv);

  BenchReport report("threads", args.nproc, args.json);
  auto comms = comm::CreateThreadsGroup(args.nproc);
  std::vector<Status> status(args.nproc);
  std::vector<int64_t> wrong(args.nproc, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < args.nproc; ++r) {
    threads.emplace_back(
        [&, r] { status[r] = RunRank(*comms[r], args, ops, &baseline, false, r == 0 ? &report : nullptr, &wrong[r]); });
  }
  for (auto& t : threads) t.join();
  for (const Status& s : status) {
    if (!s.ok()) {
      std::fprintf(stderr, "lockstep: error: %s\n", s.message().c_str());
      return 1;
    }
  }
  return wrong[0] == 0 ? 0 : 1;
}

int RunMpi(const BenchCommArgs& args, const std::vector<BenchOp>& ops) {
  auto c = comm::CreateMpiCommunicator();
  if (!c.ok()) {
    std::fprintf(stderr, "lockstep: error: %s\n", c.status().message().c_str());
    return 1;
  }
  if ((*c)->rank() == 0 && (*c)->size() != args.nproc) {
    std::fprintf(stderr, "lockstep: warning: --nproc %d, but mpirun started %d ranks; using %d\n", args.nproc,
                 (*c)->size(), (*c)->size());
  }
  BenchReport report("mpi", (*c)->size(), args.json);
  int64_t wrong = 0;
  Status s = RunRank(**c, args, ops, nullptr, true, (*c)->rank() == 0 ? &report : nullptr, &wrong);
  if (!s.ok()) {
    // Peers may be blocked in a collective: end the whole job (non-zero), never hang.
    std::fprintf(stderr, "lockstep: error: %s\n", s.message().c_str());
    comm::AbortMpi(1);
  }
  return wrong == 0 ? 0 : 1;
}

// One process a host, --workers-per-host worker threads in each (comm/hier/hier_world.h).
int RunHier(const BenchCommArgs& args, const std::vector<BenchOp>& ops) {
  const int processes = comm::MpiJobProcesses();
  auto world = comm::CreateHierWorld(args.workers_per_host);
  if (!world.ok()) {
    std::fprintf(stderr, "lockstep: error: %s\n", world.status().message().c_str());
    return 1;
  }
  const int rank0 = (*world)[0]->rank();
  BenchReport report("hier", processes * args.workers_per_host, args.json);
  std::vector<Status> status(world->size());
  std::vector<int64_t> wrong(world->size(), 0);
  std::vector<std::thread> threads;
  for (size_t j = 0; j < world->size(); ++j) {
    threads.emplace_back([&, j] {
      status[j] = RunRank(*(*world)[j], args, ops, nullptr, false, rank0 == 0 && j == 0 ? &report : nullptr, &wrong[j]);
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& s : status) {
    if (!s.ok()) {
      std::fprintf(stderr, "lockstep: error: %s\n", s.message().c_str());
      comm::AbortMpi(1);
    }
  }
  return wrong[0] == 0 ? 0 : 1;
}

// --hosts: the backend, the world and the hostfile mpirun gets (what `train` does with its
// hosts, setup/hosts.h). Ranks started by mpirun resolve the same flags to the same world.
Status ApplyHosts(BenchCommArgs* args, comm::MpirunSetup* mpirun, std::string* hostfile) {
  LS_ASSIGN_OR_RETURN(std::vector<runtime::Host> hosts, runtime::ParseHosts(args->hosts));
  if (args->backend == "threads") args->backend = "hier";
  const int slots = runtime::TotalSlots(hosts);
  if (!args->nproc_given) args->nproc = slots;
  if (args->nproc > slots)
    return Status::InvalidArgument("--nproc " + std::to_string(args->nproc) + " is more than the " +
                                   std::to_string(slots) + " slots of --hosts " + args->hosts);
  if (args->backend == "hier") {
    LS_RETURN_IF_ERROR(runtime::CheckEqualSlots(hosts));
    args->workers_per_host = hosts.front().slots;
  }
  if (comm::InsideMpirun()) return Status::Ok();
  // A hostfile of its own for this launch (mpirun numbers ranks in its order).
  LS_ASSIGN_OR_RETURN(*hostfile, runtime::WriteTempHostfile("bench", hosts, args->backend == "hier",
                                                            "written by lockstep bench-comm: ranks in this order"));
  mpirun->args.insert(mpirun->args.end(), {"--hostfile", *hostfile});  // removed once mpirun is done
  mpirun->interface = args->mpi_interface;
  if (mpirun->interface.empty()) {
    LS_ASSIGN_OR_RETURN(mpirun->interface, runtime::InterfaceReaching(hosts));
  }
  return comm::CheckMpiNetwork(*mpirun);
}

// The benchmark with its hosts resolved: checks, then this process's part (or mpirun's launch).
int Run(const BenchCommArgs& args, const std::vector<BenchOp>& ops, const comm::MpirunSetup& mpirun, int argc,
        char** argv) {
  if (args.backend == "hier" && (args.workers_per_host < 1 || args.nproc % args.workers_per_host != 0)) {
    std::fprintf(stderr, "lockstep: error: --backend hier: --nproc %d is not a multiple of --workers-per-host %d\n",
                 args.nproc, args.workers_per_host);
    return 2;
  }
  if (args.nproc < 1 || args.min_bytes < 1 || args.max_bytes < args.min_bytes || args.iters < 0) {
    std::fprintf(stderr,
                 "lockstep: error: --nproc must be >= 1 and 1 <= --min-bytes <= "
                 "--max-bytes\n");
    return 2;
  }
  const char* baseline_job = std::getenv(kBaselineEnv);
  if (baseline_job != nullptr && baseline_job[0] == '1' && comm::InsideMpirun()) {
    return RunBaselineJob(args);
  }
  if (args.backend == "mpi") {
    if (!comm::InsideMpirun()) return comm::RelaunchUnderMpirun(mpirun, args.nproc, argc, argv, {});
    return RunMpi(args, ops);
  }
  if (args.backend == "hier") {
    if (!comm::InsideMpirun())
      return comm::RelaunchUnderMpirun(mpirun, args.nproc / args.workers_per_host, argc, argv, {});
    return RunHier(args, ops);
  }
  return RunThreads(args, ops, argc, argv);
}

}  // namespace

int RunBenchComm(const BenchCommArgs& given, int argc, char** argv) {
  std::vector<BenchOp> ops;
  if (!ParseOps(given.op, &ops)) {
    std::fprintf(stderr,
                 "lockstep: error: --op: expected allreduce, reduce_scatter, all_gather, "
                 "broadcast or all, got '%s'\n",
                 given.op.c_str());
    return 2;
  }
  if (given.backend != "threads" && given.backend != "mpi" && given.backend != "hier") {
    std::fprintf(stderr, "lockstep: error: --backend: expected threads, mpi or hier, got '%s'\n",
                 given.backend.c_str());
    return 2;
  }
  BenchCommArgs args = given;
  comm::MpirunSetup mpirun = comm::MpirunSetup::FromEnvironment();
  std::string hostfile;
  if (!args.hosts.empty()) {
    Status s = ApplyHosts(&args, &mpirun, &hostfile);
    if (!s.ok()) {
      if (!hostfile.empty()) unlink(hostfile.c_str());
      std::fprintf(stderr, "lockstep: error: %s\n", s.message().c_str());
      return 2;
    }
  }
  const int code = Run(args, ops, mpirun, argc, argv);
  if (!hostfile.empty()) unlink(hostfile.c_str());
  return code;
}

}  // namespace lockstep::cli
