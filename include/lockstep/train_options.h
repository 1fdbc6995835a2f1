// TrainOptions: everything `lockstep train` was asked to do, after flag parsing and before
// the config file is read. Filled by cli/, consumed by runtime/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep {

// Public API (docs/api.md): lockstep::Train() takes these, from flags (ParseTrainFlags), a
// TOML file or text, --set strings, or code.
struct TrainOptions {
  std::string config_path;             // a TOML file; empty: config_toml
  std::string config_toml;             // TOML text, when there is no file (may be empty)
  std::vector<std::string> overrides;  // "section.key=value" from --set, in order
  int nproc = 1;
  std::string backend = "threads";  // threads | mpi | hier (one process a host, threads inside)
  // hier: the workers of each host process (0: the hosts' slots, or nproc: one process).
  int workers_per_host = 0;
  int64_t steps = -1;               // -1: train.steps from the config
  double epochs = -1;               // -1: train.epochs from the config
  std::string out_dir;              // empty: runs/<config file stem>
  std::string resume;               // empty, "auto" or a checkpoint directory
  bool deterministic = false;
  std::string trace_file;
  int max_restarts = 0;
  double heartbeat_timeout_s = 300;  // supervisor: a rank silent this long is hung
  std::string inject_fault;
  std::string layout;  // "dp=A,tp=B,pp=C" (any order)
  int zero = 0;
  int64_t mem_limit = 0;      // bytes of tensors (and optimizer state) per worker; 0: none
  bool print_config = false;  // print every config key's effective value, then stop
  // The program and the words before the trainer's flags ("lockstep train"), to start it
  // again with flags: the supervisor's restarts. Set by ParseTrainFlags.
  std::vector<std::string> command;
  // Elastic recovery (supervisor): when a restart at the current world size fails, go on with
  // fewer workers, never fewer than min_nproc (0: off, restarts keep the world size); grow
  // back at a checkpoint boundary up to max_nproc (0: never grow).
  int min_nproc = 0;
  int max_nproc = 0;
  std::string hosts;          // MPI: "h1:2,h2:2" (setup/hosts.h)
  std::string hostfile;       // MPI: an OpenMPI hostfile
  std::string mpi_interface;  // --mpi-if: the hosts' network interface (jobs over several hosts)
  std::string init_from;      // "hf:DIR" | "llmc:FILE" | "lockstep:CHECKPOINT": starting weights
};

}  // namespace lockstep
