// Runs the real lockstep binary (built beside the tests) and captures its exit status and
// output, for end-to-end tests of the CLI contract.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lockstep::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `build/lockstep <args>` (arguments are shell-quoted).
CommandResult RunLockstep(const std::vector<std::string>& args);

// A fresh empty directory under the test temp dir, removed by the caller if wanted.
std::string MakeTempDir(const std::string& prefix);

// Lines of a file.
std::vector<std::string> ReadLines(const std::string& path);

// The rows of <dir>/metrics.jsonl whose "event" is `kind`, in file order.
std::vector<nlohmann::json> Events(const std::string& run_dir, const std::string& kind);

// Rank 0's memory row at the end of the run: the last of its rows (every rank also writes one
// after its first step, while ZeRO's last reductions may still hold transient buffers).
nlohmann::json LastMemoryRow(const std::string& run_dir);

// Expects exactly one training (loss) row for each step 1..steps, in order, whatever was lost
// and redone by restarts.
void ExpectEachStepOnce(const std::string& run_dir, int64_t steps);

// What the run in run_dir really ran, from its first start row and its pipeline row:
// "dp=2,tp=2,pp=1 zero=1 world=4 threads", with " accum=K" when it accumulated K micro-batches
// and " 1f1b" or " gpipe" when it ran a pipeline. In deterministic mode every layout ends with
// the one-worker weights by design, so a silently ignored --layout, --zero, --nproc, --backend,
// accumulation or schedule would pass a hash comparison; this tells them apart.
std::string WhatRan(const std::string& run_dir);

// The weights_xxh64 of the done line of <dir>/metrics.jsonl, or "" if there is none.
std::string DoneHash(const std::string& run_dir);

// Expects that the run in run_dir resumed from a checkpoint of `step` (any step > 0 when -1):
// its metrics.jsonl has a {"event":"resume","step":step} row (the last one, for runs restarted
// several times) and the first training row after it is step + 1. A run that silently started
// over, or ignored --resume, ends with the same hash in deterministic mode; this is what tells
// them apart. Returns the step resumed from (0 after a failure).
int64_t ExpectResumedAt(const std::string& run_dir, int64_t step);

// The done-line hash of `lockstep <args>` (which must write a run into --out DIR, given as
// the placeholder "{out}"), computed once per binary and argument list and cached under the
// build directory, so tests comparing many layouts against one reference run it once. A
// file lock makes concurrent test processes wait for the first instead of racing.
std::string CachedDoneHash(const std::vector<std::string>& args);

// Flags that shrink gpt-tiny to a model that trains in well under a second per step.
std::vector<std::string> TinyGptFlags();

// `train` + TinyGptFlags() + --steps, --out, a checkpoint every `checkpoint_every` steps
// (keeping 5), then `extra`.
std::vector<std::string> TinyTrainArgs(const std::string& out, int steps, int checkpoint_every,
                                       const std::vector<std::string>& extra);

// Runs TinyTrainArgs into a fresh directory named after `prefix`, expecting success and a
// done line; returns the directory.
std::string TrainTiny(const std::string& prefix, int steps, int checkpoint_every,
                      const std::vector<std::string>& extra);

}  // namespace lockstep::testing
