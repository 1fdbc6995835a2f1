#include "lockstep/api/train_flags.h"

#include "lockstep/core/config.h"
#include "lockstep/runtime/setup/hosts.h"
#include "lockstep/runtime/setup/slurm_env.h"

namespace lockstep::api {

void AddTrainFlags(CLI::App* t, FlagValues* f) {
  TrainOptions& o = f->options;
  t->add_option("--config", o.config_path, "TOML config file");
  t->add_option("--set", f->sets, "override a config key: section.key=value (repeatable)");
  f->nproc_option = t->add_option("--nproc", o.nproc, "number of workers")->check(CLI::Range(1, 4096));
  t->add_option("--backend", o.backend,
                "threads (one process), mpi (a process a worker) or hier (a process a host, threads inside; "
                "the default with --hosts)")
      ->check(CLI::IsMember({"threads", "mpi", "hier"}));
  t->add_option("--workers-per-host", o.workers_per_host,
                "hier: workers (threads) in each host process; --nproc / this many processes")
      ->check(CLI::Range(1, 4096));
  auto* steps =
      t->add_option("--steps", o.steps, "train this many steps")->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  t->add_option("--epochs", o.epochs, "train this many epochs")->check(CLI::Range(0.0, 1e6))->excludes(steps);
  t->add_option("--out", o.out_dir, "output directory (default runs/<config name>)");
  t->add_option("--resume", o.resume, "auto (newest valid checkpoint in --out) or a checkpoint directory");
  t->add_flag("--deterministic", o.deterministic, "bit-identical results for any number of workers");
  t->add_option("--trace", o.trace_file, "write a Chrome trace (JSON) of the run");
  t->add_option("--max-restarts", o.max_restarts, "restart failed workers up to R times")->check(CLI::Range(0, 1000));
  t->add_option("--inject-fault", o.inject_fault, "fault to inject, e.g. kill:rank=1:step=37");
  t->add_option("--heartbeat-timeout", o.heartbeat_timeout_s,
                "with --max-restarts: seconds without progress before a worker counts as hung")
      ->check(CLI::Range(0.1, 1e6));
  t->add_option("--layout", o.layout, "parallel layout, e.g. dp=2,tp=2,pp=1");
  t->add_option("--zero", o.zero, "ZeRO stage 0|1|2|3")->check(CLI::Range(0, 3));
  t->add_option("--mem-limit", f->mem_limit, "most tensor bytes one worker may hold, e.g. 512M (0: no limit)");
  t->add_option("--min-nproc", o.min_nproc, "with --max-restarts: go on with fewer workers, down to M")
      ->check(CLI::Range(1, 4096));
  t->add_option("--max-nproc", o.max_nproc, "with --min-nproc: grow back at checkpoints, up to N workers")
      ->check(CLI::Range(1, 4096));
  t->add_option("--hosts", o.hosts, "MPI hosts and their slots, e.g. node1:2,node2:2");
  t->add_option("--hostfile", o.hostfile, "MPI hostfile (NAME slots=N a line)");
  t->add_option("--mpi-if", o.mpi_interface,
                "--backend mpi over several hosts: the network interface that connects them (required then)");
  t->add_option("--init-from", o.init_from, "start from these weights: hf:DIR, llmc:FILE or lockstep:CHECKPOINT");
  t->add_flag("--print-config", o.print_config,
              "print every config key with its effective value and where it came from, then exit");
}

Status FinishTrainFlags(FlagValues* f) {
  f->options.overrides.insert(f->options.overrides.end(), f->sets.begin(), f->sets.end());
  f->sets.clear();
  if (!f->mem_limit.empty()) {
    LS_ASSIGN_OR_RETURN(f->options.mem_limit, ParseSize(f->mem_limit, "--mem-limit"));
  }
  // --hosts/--hostfile without --nproc: one worker per slot.
  const bool nproc_given = f->nproc_option != nullptr && f->nproc_option->count() > 0;
  // Inside a Slurm job: its nodes as hosts, or its tasks as the MPI job's processes.
  LS_RETURN_IF_ERROR(runtime::ApplySlurmJob(&f->options, nproc_given));
  LS_RETURN_IF_ERROR(runtime::ApplyHostsToNproc(&f->options, nproc_given));
  return Status::Ok();
}

}  // namespace lockstep::api
