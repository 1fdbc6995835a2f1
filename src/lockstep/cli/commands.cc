#include "lockstep/cli/commands.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "lockstep/train.h"
#include "lockstep/api/train_flags.h"
#include "lockstep/cli/bench_comm.h"
#include "lockstep/cli/evaluate.h"
#include "lockstep/cli/export_command.h"
#include "lockstep/cli/inspect.h"
#include "lockstep/cli/plan_command.h"
#include "lockstep/cli/report_command.h"
#include "lockstep/cli/sample_command.h"
#include "lockstep/cli/tokenizer_command.h"
#include "lockstep/cli/tokens_command.h"
#include "lockstep/core/config.h"
#include "lockstep/core/version.h"
#include "lockstep/builtin_job.h"

namespace lockstep::cli {
namespace {

// Bad input exits 2, a non-finite gradient or loss 3, other failures at run time 1
// (DESIGN.md, CLI contract).
int ExitCodeFor(const Status& s) { return lockstep::ExitCodeFor(s, "lockstep"); }

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

  // The trainer's flags are the library's (api/train_flags.h): a program's own trainer takes
  // the same ones.
  api::FlagValues train_flags;
  CLI::App* t = app.add_subcommand("train", "train a model from a TOML config");
  api::AddTrainFlags(t, &train_flags);
  const TrainOptions& train = train_flags.options;

  EvalOptions eval;
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
  b->add_option("--backend", bench.backend, "threads, mpi or hier")->check(CLI::IsMember({"threads", "mpi", "hier"}));
  b->add_option("--workers-per-host", bench.workers_per_host, "hier: worker threads in each host process")
      ->check(CLI::Range(1, 4096));
  CLI::Option* bench_nproc = b->add_option("--nproc", bench.nproc, "number of ranks")->check(CLI::Range(1, 4096));
  b->add_option("--hosts", bench.hosts, "across these hosts: H:N,... (N workers a host; hier unless --backend mpi)");
  b->add_option("--mpi-if", bench.mpi_interface, "with --hosts: the interface between them (default: on their subnet)");
  b->add_option("--op", bench.op, "allreduce|reduce_scatter|all_gather|broadcast|all");
  b->add_option("--min-bytes", min_bytes, "smallest message (K/M/G suffixes)");
  b->add_option("--max-bytes", max_bytes, "largest message (K/M/G suffixes)");
  b->add_option("--iters", bench.iters, "timed iterations a size (default: by size, 1000 down to 5)")
      ->check(CLI::Range(1, 1000000));
  b->add_flag("--json", bench.json, "one JSON object per line instead of a table");

  ReportArgs report;
  CLI::App* rep = AddReportCommand(app, &report);
  TokensArgs tokens_args;
  CLI::App* tokens = AddTokensCommand(app, &tokens_args);
  TokenizerArgs tokenizer_args;
  CLI::App* tokenizer = AddTokenizerCommand(app, &tokenizer_args);
  SampleOptions sample_options;
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
    if (Status s = api::FinishTrainFlags(&train_flags); !s.ok()) return ExitCodeFor(s);
    train_flags.options.command = {"lockstep", "train"};
    // The same launch as lockstep::Train (print-config, supervisor, mpirun, the trainer), with
    // the built-in models and data sets.
    return api::RunTrainCommand(BuiltinJob(), train);
  }
  if (e->parsed()) {
    if (!require(!eval.config_path.empty(), "--config") || !require(!eval.checkpoint_dir.empty(), "--checkpoint"))
      return 2;
    return ExitCodeFor(RunEvaluate(eval));
  }
  if (in->parsed()) return ExitCodeFor(InspectCheckpoint(inspect_dir));
  if (rep->parsed()) return RunReport(report);
  if (tokens->parsed()) return ExitCodeFor(RunTokensCommand(tokens_args));
  if (tokenizer->parsed()) return ExitCodeFor(RunTokenizerCommand(tokenizer_args));
  if (sample->parsed()) return ExitCodeFor(RunSampleCommand(sample_options));
  if (exp->parsed()) return ExitCodeFor(RunExportCommand(export_args));
  if (b->parsed()) {
    if (!ParseSizeFlag(min_bytes, "--min-bytes", &bench.min_bytes)) return 2;
    if (!ParseSizeFlag(max_bytes, "--max-bytes", &bench.max_bytes)) return 2;
    if (bench.min_bytes > bench.max_bytes) {
      std::fprintf(stderr, "lockstep: error: --min-bytes must not exceed --max-bytes\n");
      return 2;
    }
    bench.nproc_given = bench_nproc->count() > 0;
    return RunBenchComm(bench, argc, argv);
  }
  if (plan.app->parsed()) return RunPlanCommand(plan, argc, argv);
  return 2;
}

}  // namespace lockstep::cli
