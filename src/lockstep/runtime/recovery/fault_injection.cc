#include "lockstep/runtime/recovery/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>

namespace lockstep::runtime {
namespace {

std::atomic<bool> fired{false};

[[noreturn]] void Fire(const FaultSpec& spec, int rank, const char* when) {
  std::fprintf(stderr, "lockstep: injected fault: %s rank %d %s\n",
               spec.kind == FaultSpec::Kind::kKill ? "SIGKILL to" : "hang of", rank, when);
  std::fflush(stderr);
  if (spec.kind == FaultSpec::Kind::kKill) {
    ::kill(::getpid(), SIGKILL);
  }
  for (;;) ::pause();  // hang (and, after SIGKILL, never returns)
}

}  // namespace

void InjectAtStep(const FaultSpec& spec, int rank, int64_t step) {
  if (!StopDue(spec, rank, step)) return;
  if (fired.exchange(true)) return;
  Fire(spec, rank, ("at step " + std::to_string(step + 1) + (spec.permanent ? " (permanent)" : "")).c_str());
}

void InjectDuringCheckpoint(const FaultSpec& spec, int rank, int64_t step) {
  if (!spec.during_checkpoint || rank != spec.rank || (spec.step != 0 && spec.step != step)) return;
  if (fired.exchange(true)) return;
  Fire(spec, rank, "while writing a checkpoint");
}

}  // namespace lockstep::runtime
