// Supervisor: `lockstep train --max-restarts R`. The process the user started becomes a
// supervisor; the training job (one process for the threads backend, mpirun and its ranks for
// MPI) runs as a child process group under it. A worker that exits non-zero, dies from a
// signal, or stops beating its heartbeat for --heartbeat-timeout seconds (a hang; before the
// first beat, start-up gets at least 60 s) fails the
// attempt: the supervisor stops the whole group (SIGTERM, then SIGKILL after a grace period)
// and starts it again with --resume auto, up to R times, logging each restart and its cause
// (stderr and a {"event":"restart"} row in metrics.jsonl). Bad input (exit status 2) is not
// retried. --inject-fault applies to the first attempt only (a permanent kill: to every
// attempt that has its rank).
//
// Elastic (--min-nproc M, recovery/elastic_recovery.h): when a restart at the same world size
// fails again before a new checkpoint, or a host stops answering, the next attempt runs on
// the largest smaller world the plan allows (>= M), from the newest valid checkpoint; with
// --max-nproc the world grows back at a checkpoint boundary. Each change is a line on stderr
// and a {"event":"world_changed","from","to","step","reason"} row. Fewer than M workers
// left: kUnavailable (exit status 4) naming the lost capacity; `latest` is left as it was.
//
// The child's pid is written to <out>/worker.pid so that chaos tests can kill it from
// outside.
#pragma once

#include "lockstep/core/result.h"
#include "lockstep/builtin_job.h"
#include "lockstep/train_options.h"

namespace lockstep::runtime {

// argv0: unused (the child is /proc/self/exe). Returns Ok when an attempt finished the run.
// `job`: what the children train (the elastic planner checks smaller worlds against it).
Status RunSupervised(const TrainOptions& options, const Job& job = BuiltinJob());

}  // namespace lockstep::runtime
