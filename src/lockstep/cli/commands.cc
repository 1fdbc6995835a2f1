#include "lockstep/cli/commands.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "lockstep/cli/bench_comm.h"
#include "lockstep/cli/report_command.h"
#include "lockstep/cli/export_command.h"
#include "lockstep/cli/sample_command.h"
#include "lockstep/cli/tokens_command.h"
#include "lockstep/cli/plan_command.h"
#include "lockstep/comm/mpi/launch.h"
#include "lockstep/core/config.h"
#include "lockstep/core/version.h"
#include "lockstep/runtime/launch/hosts.h"
#include "lockstep/runtime/launch/train.h"
#include "lockstep/runtime/recovery/checkpoint_inspect.h"
#include "lockstep/runtime/recovery/supervisor.h"
#include "lockstep/runtime/training/evaluate.h"

namespace lockstep::cli {
namespace {

// Bad input exits 2, a non-finite gradient or loss 3, other failures at run time 1
// (DESIGN.md, CLI contract).
int ExitCodeFor(const Status& s) {
  if (s.ok()) return 0;
  // An empty message: the error was already printed (by the supervised worker).
  if (!s.message().empty()) std::fprintf(stderr, "lockstep: error: %s\n", s.message().c_str());
  if (s.code() == StatusCode::kNonFinite) return 3;
  if (s.code() == StatusCode::kUnavailable) return 4;  // fewer workers left than --min-nproc
  return s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kNotFound ? 2 : 1;
}

// CLI11 accepts sizes as strings; K/M/G suffixes are ours.
bool ParseSizeFlag(const std::string& text, const char* flag, int64_t* out) {
  auto v = ParseSize(text, flag);
  if (!v.ok()) {
    std::fprintf(stderr, "lockstep: error: %s\n", v.status().message().c_str());
    return false;
  }
  *out = *v;
  return true;
}

}  // namespace

int Main(int argc, char** argv) {
  CLI::App app{"lockstep: data-, tensor- and pipeline-parallel training in C++"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every subcommand");
  app.set_version_flag("--version", std::string(LOCKSTEP_VERSION));

  runtime::TrainOptions train;
  CLI::App* t = app.add_subcommand("train", "train a model from a TOML config");
  t->add_option("--config", train.config_path, "TOML config file (required)");
  t->add_option("--set", train.overrides, "override a config key: section.key=value (repeatable)");
  t->add_option("--nproc", train.nproc, "number of workers")->check(CLI::Range(1, 4096));
  t->add_option("--backend", train.backend, "threads (one process) or mpi (processes)")
      ->check(CLI::IsMember({"threads", "mpi"}));
  auto* steps =
      t->add_option("--steps", train.steps, "train this many steps")->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  t->add_option("--epochs", train.epochs, "train this many epochs")->check(CLI::Range(0.0, 1e6))->excludes(steps);
  t->add_option("--out", train.out_dir, "output directory (default runs/<config name>)");
  t->add_option("--resume", train.resume, "auto (newest valid checkpoint in --out) or a checkpoint directory");
  t->add_flag("--deterministic", train.deterministic, "bit-identical results for any number of workers");
  t->add_option("--trace", train.trace_file, "write a Chrome trace (JSON) of the run");
  t->add_option("--max-restarts", train.max_restarts, "restart failed workers up to R times")
      ->check(CLI::Range(0, 1000));
  t->add_option("--inject-fault", train.inject_fault, "fault to inject, e.g. kill:rank=1:step=37");
  t->add_option("--heartbeat-timeout", train.heartbeat_timeout_s,
                "with --max-restarts: seconds without progress before a worker counts as hung")
      ->check(CLI::Range(0.1, 1e6));
  t->add_option("--layout", train.layout, "parallel layout, e.g. dp=2,tp=2,pp=1");
  t->add_option("--zero", train.zero, "ZeRO stage 0|1|2|3")->check(CLI::Range(0, 3));
  std::string mem_limit;
  t->add_option("--mem-limit", mem_limit, "most tensor bytes one worker may hold, e.g. 512M (0: no limit)");
  t->add_option("--min-nproc", train.min_nproc, "with --max-restarts: go on with fewer workers, down to M")
      ->check(CLI::Range(1, 4096));
  t->add_option("--max-nproc", train.max_nproc, "with --min-nproc: grow back at checkpoints, up to N workers")
      ->check(CLI::Range(1, 4096));
  t->add_option("--hosts", train.hosts, "MPI hosts and their slots, e.g. node1:2,node2:2");
  t->add_option("--hostfile", train.hostfile, "MPI hostfile (NAME slots=N a line)");
  t->add_option("--mpi-if", train.mpi_interface,
                "--backend mpi over several hosts: the network interface that connects them (required then)");
  t->add_option("--init-from", train.init_from, "start from these weights: hf:DIR, llmc:FILE or lockstep:CHECKPOINT");
  t->add_flag("--print-config", train.print_config,
              "print every config key with its effective value and where it came from, then exit");

  runtime::EvalOptions eval;
  CLI::App* e = app.add_subcommand("eval", "evaluate a checkpoint on the validation set");
  e->add_option("--config", eval.config_path, "TOML config file (required)");
  e->add_option("--set", eval.overrides, "override a config key: section.key=value (repeatable)");
  e->add_option("--checkpoint", eval.checkpoint_dir, "checkpoint directory (required)");

  std::string inspect_dir;
  CLI::App* in = app.add_subcommand("inspect", "print a checkpoint's manifest and verify its checksums");
  in->add_option("CHECKPOINT_DIR", inspect_dir, "checkpoint directory (or a checkpoints root: its latest)")->required();

  BenchCommArgs bench;
  std::string min_bytes = "8", max_bytes = "64M";
  CLI::App* b = app.add_subcommand("bench-comm", "measure collective bandwidth and latency (nccl-tests style)");
  b->add_option("--backend", bench.backend, "threads or mpi")->check(CLI::IsMember({"threads", "mpi"}));
  b->add_option("--nproc", bench.nproc, "number of ranks")->check(CLI::Range(1, 4096));
  b->add_option("--op", bench.op, "allreduce|reduce_scatter|all_gather|broadcast|all");
  b->add_option("--min-bytes", min_bytes, "smallest message (K/M/G suffixes)");
  b->add_option("--max-bytes", max_bytes, "largest message (K/M/G suffixes)");
  b->add_flag("--json", bench.json, "one JSON object per line instead of a table");

  ReportArgs report;
  CLI::App* rep = AddReportCommand(app, &report);
  TokensArgs tokens_args;
  CLI::App* tokens = AddTokensCommand(app, &tokens_args);
  runtime::SampleOptions sample_options;
  CLI::App* sample = AddSampleCommand(app, &sample_options);
  ExportArgs export_args;
  CLI::App* exp = AddExportCommand(app, &export_args);
  PlanCommand plan;
  AddPlanCommand(app, &plan);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForVersion&) {
    std::printf("lockstep %s\n", LOCKSTEP_VERSION);
    return 0;
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& err) {
    std::fprintf(stderr, "lockstep: error: %s\n", err.what());
    return 2;
  }

  // Required options are checked here, after parsing, so that an unknown flag is reported
  // by name instead of as a missing --config.
  auto require = [](bool present, const char* what) {
    if (!present) std::fprintf(stderr, "lockstep: error: %s is required\n", what);
    return present;
  };
  if (t->parsed()) {
    if (!require(!train.config_path.empty(), "--config")) return 2;
    if (!mem_limit.empty() && !ParseSizeFlag(mem_limit, "--mem-limit", &train.mem_limit)) return 2;
    if (Status h = runtime::ApplyHostsToNproc(&train, t->count("--nproc") > 0); !h.ok()) return ExitCodeFor(h);
    if (train.print_config) return ExitCodeFor(runtime::RunTrain(train));  // plans only, in this process
    // The supervisor comes first: it runs the whole job (mpirun included) as its child.
    if (train.max_restarts > 0 && !comm::InsideMpirun()) return ExitCodeFor(runtime::RunSupervised(train));
    if (train.backend == "mpi" && !comm::InsideMpirun()) {
      if (Status h = runtime::PrepareHostfileForMpirun(train); !h.ok()) return ExitCodeFor(h);
      if (Status net = comm::ConfigureMpiNetwork(train.mpi_interface); !net.ok()) return ExitCodeFor(net);
      return comm::RelaunchUnderMpirun(train.nproc, argc, argv, {});
    }
    return ExitCodeFor(runtime::RunTrain(train));
  }
  if (e->parsed()) {
    if (!require(!eval.config_path.empty(), "--config") || !require(!eval.checkpoint_dir.empty(), "--checkpoint"))
      return 2;
    return ExitCodeFor(runtime::RunEvaluate(eval));
  }
  if (in->parsed()) return ExitCodeFor(runtime::InspectCheckpoint(inspect_dir));
  if (rep->parsed()) return RunReport(report);
  if (tokens->parsed()) return ExitCodeFor(RunTokensCommand(tokens_args));
  if (sample->parsed()) return ExitCodeFor(RunSampleCommand(sample_options));
  if (exp->parsed()) return ExitCodeFor(RunExportCommand(export_args));
  if (b->parsed()) {
    if (!ParseSizeFlag(min_bytes, "--min-bytes", &bench.min_bytes)) return 2;
    if (!ParseSizeFlag(max_bytes, "--max-bytes", &bench.max_bytes)) return 2;
    if (bench.min_bytes > bench.max_bytes) {
      std::fprintf(stderr, "lockstep: error: --min-bytes must not exceed --max-bytes\n");
      return 2;
    }
    return RunBenchComm(bench, argc, argv);
  }
  if (plan.app->parsed()) return RunPlanCommand(plan, argc, argv);
  return 2;
}

}  // namespace lockstep::cli
