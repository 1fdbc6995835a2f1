// lockstep::Train: the one entry point that trains a Job — the same trainer, with the same
// options, as `lockstep train` (which calls it with BuiltinJob()): any number of workers as
// threads or MPI processes, any layout the model supports, ZeRO, checkpoints, resume, the
// supervisor, metrics. Public API (docs/api.md).
#pragma once

#include <string>

#include "lockstep/core/result.h"
#include "lockstep/job.h"
#include "lockstep/train_options.h"

namespace lockstep {

// Trains `job` as `options` say, and returns when the run is over: Ok, InvalidArgument (bad
// options, config, data or checkpoint: the message names it), NonFinite (a NaN/inf gradient
// or loss stopped it), Unavailable (an elastic run lost workers below --min-nproc; `latest`
// is intact), or another error. Never exits the process.
//
// With backend "mpi" outside mpirun the program is started again under mpirun (its own
// command line, /proc/self/cmdline) and every rank runs its main() up to this call again, so
// the job must be built the same way each time; the call returns mpirun's outcome. With
// max_restarts > 0 the supervisor restarts the program with the trainer's flags (--resume
// auto, --out, ...): the program must read them with ParseTrainFlags (TrainMain does).
// Rank 0 prints "done: N steps, val_loss L, ..., weights_xxh64 H" on stdout at the end.
Status Train(const Job& job, const TrainOptions& options);

// What ParseTrainFlags read: the options, or that --help asked for the flags (they were
// printed on stdout; the program should exit 0 without training).
struct TrainFlags {
  TrainOptions options;
  bool help = false;
};

// The trainer's flags (those of `lockstep train`: --config, --set, --nproc, --backend,
// --steps/--epochs, --out, --resume, --deterministic, --layout, --zero, --max-restarts, ...)
// over `defaults`: a flag replaces a field, --set appends to defaults.overrides. argv[0] is
// the program. Unknown flags or bad values: InvalidArgument naming them.
Result<TrainFlags> ParseTrainFlags(int argc, const char* const* argv, TrainOptions defaults = {});

// A program's main() in one line: ParseTrainFlags, Train, and the exit status the lockstep
// command uses (0 done or --help; 2 bad input; 3 non-finite; 4 fewer workers left than
// --min-nproc; 1 other failure), after printing "<program>: error: <message>" on stderr for
// a failure.
int TrainMain(int argc, const char* const* argv, const Job& job, TrainOptions defaults = {});

// That exit status for `s`, printing the error line (prefixed with `program`) when there is one.
int ExitCodeFor(const Status& s, const std::string& program);

}  // namespace lockstep
