#include "lockstep/cli/plan_command.h"

#include <array>
#include <cstdio>
#include <functional>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/cli/bench_comm_measure.h"
#include "lockstep/cli/plan_hosts.h"
#include "lockstep/comm/mpi/launch.h"
#include "lockstep/comm/mpi/mpi_communicator.h"
#include "lockstep/comm/threads/threads_world.h"
#include "lockstep/core/config.h"
#include "lockstep/runtime/setup/slurm_env.h"

namespace lockstep::cli {
namespace {

using planner::CommCurve;
using planner::CommOp;
using planner::CommTable;

constexpr int64_t kMinBytes = 4 << 10, kMaxBytes = 64 << 20;

// Every fourth power of two from 4 KiB to 64 MiB (bench-comm's sizes for the op and group).
std::vector<int64_t> Sizes(BenchOp op, int n) {
  std::vector<int64_t> out;
  for (int64_t b : BenchSizes(op, n, kMinBytes, kMaxBytes))
    if (out.empty() || b >= 4 * out.back()) out.push_back(b);
  return out;
}

// Few iterations: about 16 MiB moved per size, 3 to 50.
int Iters(int64_t bytes) {
  return static_cast<int>(std::clamp<int64_t>((16 << 20) / std::max<int64_t>(bytes, 1), 3, 50));
}

// Runs fn(0) .. fn(n - 1) on n threads at once (the ranks of a threads group, which must all
// take part in their collectives); the first error any of them returned.
Status RunOnThreads(int n, const std::function<Status(int)>& fn) {
  std::vector<Status> status(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back([&, i] { status[static_cast<size_t>(i)] = fn(i); });
  for (std::thread& t : threads) t.join();
  for (const Status& s : status) LS_RETURN_IF_ERROR(s);
  return Status::Ok();
}

// `groups` groups of `size` ranks, all measuring at once (the layout runs them side by side);
// group 0's rank 0 reports.
Result<std::vector<CommCurve>> MeasureThreadsGroups(int size, int groups, const std::vector<BenchOp>& ops) {
  std::vector<std::vector<std::shared_ptr<comm::Communicator>>> comms;
  for (int g = 0; g < groups; ++g) comms.push_back(comm::CreateThreadsGroup(size));
  std::vector<CommCurve> curves(ops.size());
  LS_RETURN_IF_ERROR(RunOnThreads(size * groups, [&](int i) {
    const int g = i / size, r = i % size;
    for (size_t k = 0; k < ops.size(); ++k)
      for (int64_t bytes : Sizes(ops[k], size)) {
        LS_ASSIGN_OR_RETURN(BenchPoint p, MeasurePoint(*comms[g][r], ops[k], bytes, Iters(bytes)));
        if (g == 0 && r == 0) curves[k].Add(bytes, p.time_us * 1e-3);
      }
    return Status::Ok();
  }));
  return curves;
}

Result<CommTable> MeasureThreads(int nproc, const std::vector<int>& groups, bool send) {
  CommTable table;
  const std::vector<BenchOp> ops = {BenchOp::kAllreduce, BenchOp::kReduceScatter, BenchOp::kAllGather};
  for (int g : groups) {
    LS_ASSIGN_OR_RETURN(std::vector<CommCurve> curves, MeasureThreadsGroups(g, std::max(1, nproc / g), ops));
    for (size_t i = 0; i < ops.size(); ++i) table.Set(ToCommOp(ops[i]), g, curves[i]);
  }
  if (send) {
    LS_ASSIGN_OR_RETURN(std::vector<CommCurve> curves, MeasureThreadsGroups(2, 1, {BenchOp::kBroadcast}));
    table.Set(CommOp::kSend, 2, curves[0]);
  }
  return table;
}

// The command line `args` (argv[0] first) under mpirun with `size` ranks, its standard output
// captured; mpirun's exit status.
int RunJob(int size, std::vector<std::string> args, std::string* out) {
  std::vector<char*> av;
  for (std::string& a : args) av.push_back(a.data());
  av.push_back(nullptr);
  return comm::RunUnderMpirun(comm::MpirunSetup::FromEnvironment(), size, static_cast<int>(args.size()), av.data(), {},
                              {}, out);
}

// `lockstep bench-comm --backend mpi --json` under mpirun with `size` ranks, parsed.
Status MeasureMpiGroup(int size, const std::string& op, int argc, char** argv, CommTable* table) {
  std::vector<std::string> args = {argv[0],       "bench-comm",
                                   "--backend",   "mpi",
                                   "--nproc",     std::to_string(size),
                                   "--op",        op,
                                   "--min-bytes", std::to_string(kMinBytes),
                                   "--max-bytes", std::to_string(kMaxBytes),
                                   "--json"};
  std::string out;
  const int rc = RunJob(size, args, &out);
  if (rc != 0)
    return Status::Internal("plan: bench-comm under mpirun -np " + std::to_string(size) + " failed (status " +
                            std::to_string(rc) + ")");
  AddBenchLines(out, size, 1, table);
  return Status::Ok();
}

Result<CommTable> MeasureMpi(const std::vector<int>& groups, bool send, int argc, char** argv) {
  CommTable table;
  for (int g : groups) {
    for (const char* op : {"allreduce", "reduce_scatter", "all_gather"})
      LS_RETURN_IF_ERROR(MeasureMpiGroup(g, op, argc, argv, &table));
  }
  if (send) LS_RETURN_IF_ERROR(MeasureMpiGroup(2, "broadcast", argc, argv, &table));
  return table;
}

// ZeRO's cost over `nproc` worker threads, measured as the mpi probe measures it over
// processes (every thread a rank of one threads world); rank 0's figures.
Result<planner::ZeroProbe> MeasureThreadsZero(const planner::PlanOptions& o, const std::vector<int64_t>& rows) {
  std::vector<std::shared_ptr<comm::Communicator>> comms = comm::CreateThreadsGroup(o.nproc);
  planner::ZeroProbe figures;
  LS_RETURN_IF_ERROR(RunOnThreads(o.nproc, [&](int r) {
    LS_ASSIGN_OR_RETURN(auto z, planner::MeasurePlanZero(o, rows, comms[static_cast<size_t>(r)]));
    if (r == 0) figures = z;
    return Status::Ok();
  }));
  return figures;
}

// ZeRO's cost over `nproc` ranks as processes: this plan command again under mpirun with
// --zero-probe (RunZeroProbe), whose rank 0 prints it as one JSON line.
Result<planner::ZeroProbe> MeasureMpiZero(int nproc, const std::vector<int64_t>& rows, int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  std::string list;
  for (int64_t n : rows) list += (list.empty() ? "" : ",") + std::to_string(n);
  args.push_back("--zero-probe");
  args.push_back(list);
  std::string out;
  const int rc = RunJob(nproc, args, &out);
  if (rc != 0)
    return Status::Internal("plan: the ZeRO measurement under mpirun -np " + std::to_string(nproc) +
                            " failed (status " + std::to_string(rc) + ")");
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("zero") || !j["zero"].is_array() || j["zero"].size() != 4) continue;
    planner::ZeroProbe z;
    z.zero = j["zero"].get<std::array<double, 4>>();
    z.plain_rows = j.value("plain_rows", int64_t{0});
    z.plain_ms = j.value("plain_ms", 0.0);
    return z;
  }
  return Status::Internal("plan: the ZeRO measurement under mpirun printed no result");
}

// Inside that job: every rank measures; rank 0 prints.
int RunZeroProbe(const PlanCommand& cmd) {
  if (!comm::InsideMpirun()) {
    std::fprintf(stderr, "lockstep: error: --zero-probe is internal to an mpi plan (it runs under mpirun)\n");
    return 2;
  }
  std::vector<int64_t> rows;
  std::istringstream list(cmd.zero_probe);
  for (std::string item; std::getline(list, item, ',');) {
    Result<int64_t> n = ParseSize(item, "--zero-probe");
    if (!n.ok() || *n < 1) {
      std::fprintf(stderr, "lockstep: error: --zero-probe: expected rows like 4,8,16, got '%s'\n",
                   cmd.zero_probe.c_str());
      return 2;
    }
    rows.push_back(*n);
  }
  auto c = comm::CreateMpiCommunicator();
  Result<planner::ZeroProbe> z = c.ok() ? planner::MeasurePlanZero(cmd.options, rows, *c) : c.status();
  if (!z.ok()) {
    // Peers may be blocked in a collective: end the whole job (non-zero), never hang.
    std::fprintf(stderr, "lockstep: error: %s\n", z.status().message().c_str());
    comm::AbortMpi(1);
  }
  if ((*c)->rank() == 0)
    std::printf(
        "%s\n",
        nlohmann::json({{"zero", z->zero}, {"plain_rows", z->plain_rows}, {"plain_ms", z->plain_ms}}).dump().c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace

void AddPlanCommand(CLI::App& app, PlanCommand* cmd) {
  planner::PlanOptions& o = cmd->options;
  CLI::App* p = app.add_subcommand("plan", "profile one worker, predict every layout of N workers, recommend one");
  p->add_option("--config", o.config_path, "TOML config file (required)");
  p->add_option("--set", o.overrides, "override a config key: section.key=value (repeatable)");
  p->add_option("--nproc", o.nproc, "number of workers to plan for (required)")->check(CLI::Range(1, 4096));
  p->add_option("--backend", o.backend, "threads or mpi: the collectives measured")
      ->check(CLI::IsMember({"threads", "mpi"}));
  p->add_option("--mem-limit", cmd->mem_limit, "bytes one worker may hold, e.g. 512M (default: machine memory / N)");
  p->add_option("--hardware", o.hardware_path, "TOML file describing another machine (instead of measuring this one)");
  p->add_option("--json", o.json_path, "write the plan as JSON (plan.json)");
  p->add_option("--out", o.out_dir, "directory of the profile cache (default runs/<config name>)");
  p->add_flag("--fresh", o.fresh,
              "measure the profile again, replacing the cache (a shared machine's speed moves: a plan can "
              "catch it slow or fast)");
  p->add_option("--hosts", cmd->hosts,
                 "plan for workers on these hosts, e.g. h0:2,h1:2 (one process a host; measures their links)");
  p->add_option("--hostfile", cmd->hostfile, "plan for the hosts of this OpenMPI hostfile (as --hosts)");
  p->add_option("--mpi-if", cmd->mpi_interface,
                "with hosts: the network interface reaching them (default: the one on their subnet)");
  p->add_option("--zero-probe", cmd->zero_probe)->group("");  // internal (MeasureMpiZero)
  p->add_flag("--host-facts", cmd->host_facts)->group("");    // internal (ResolvePlanHosts)
  cmd->app = p;
}

int RunPlanCommand(PlanCommand& cmd, int argc, char** argv) {
  planner::PlanOptions& o = cmd.options;
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "lockstep: error: %s\n", message.c_str());
    return 2;
  };
  if (cmd.host_facts) return PrintHostFacts();
  if (o.config_path.empty()) return fail("--config is required");
  // In an allocation's batch script (or salloc's shell) of several nodes, as `train` there: the
  // nodes are the hosts, unless --hosts, --hostfile, --nproc or --hardware says otherwise.
  std::string hosts_flag = cmd.hosts;
  if (hosts_flag.empty() && cmd.hostfile.empty() && cmd.app->count("--nproc") == 0 && o.hardware_path.empty()) {
    Result<std::optional<runtime::SlurmJob>> job = runtime::ReadSlurmJob();
    if (!job.ok()) return fail(job.status().message());
    if (*job && !(*job)->in_step && (*job)->nodes.size() > 1) hosts_flag = runtime::FormatHosts((*job)->nodes);
  }
  const bool with_hosts = !hosts_flag.empty() || !cmd.hostfile.empty();
  if (cmd.app->count("--nproc") == 0 && !with_hosts) return fail("--nproc is required (or --hosts)");
  if (!cmd.mem_limit.empty()) {
    Result<int64_t> v = ParseSize(cmd.mem_limit, "--mem-limit");
    if (!v.ok()) return fail(v.status().message());
    o.mem_limit = *v;
  }
  if (!cmd.zero_probe.empty()) return RunZeroProbe(cmd);
  PlanHostsSetup hosts;
  if (with_hosts && !o.hardware_path.empty())
    return fail("--hardware describes the machines; --hosts measures real ones: give one of them");
  if (with_hosts) {
    Result<PlanHostsSetup> h =
        ResolvePlanHosts(hosts_flag, cmd.hostfile, cmd.mpi_interface, cmd.app->count("--nproc") > 0, argv[0], &o);
    if (!h.ok()) {
      std::fprintf(stderr, "lockstep: error: %s\n", h.status().message().c_str());
      return h.status().code() == StatusCode::kInternal ? 1 : 2;
    }
    hosts = std::move(*h);
  }
  const int nproc = o.nproc;
  // Groups inside one host are measured as that host's workers run them.
  const int local = with_hosts ? o.hosts.workers_per_host : nproc;
  const bool mpi = o.backend == "mpi";
  planner::ZeroMeasurer measure_zero = [&](const std::vector<int64_t>& rows) {
    return mpi ? MeasureMpiZero(nproc, rows, argc, argv) : MeasureThreadsZero(o, rows);
  };
  Status s = planner::RunPlan(
      o,
      [&](const std::vector<int>& groups, bool send) -> Result<CommTable> {
        return mpi ? MeasureMpi(groups, send, argc, argv) : MeasureThreads(local, groups, send);
      },
      measure_zero,
      [&](const std::vector<planner::HostGroup>& groups, bool send, int64_t max_bytes) {
        return MeasureAcrossHosts(hosts, o.backend, groups, send, max_bytes);
      });
  if (s.ok()) return 0;
  std::fprintf(stderr, "lockstep: error: %s\n", s.message().c_str());
  return s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kNotFound ? 2 : 1;
}

}  // namespace lockstep::cli
