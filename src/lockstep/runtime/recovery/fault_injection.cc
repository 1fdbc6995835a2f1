#include "lockstep/runtime/recovery/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace lockstep::runtime {
namespace {

std::atomic<bool> fired{false};

Status Bad(const std::string& spec, const std::string& why) {
  return Status::InvalidArgument(
      "--inject-fault '" + spec + "': " + why +
      " (expected kill:rank=R:step=S, kill:rank=R:during=checkpoint[:step=S] or hang:rank=R:step=S)");
}

bool ParseInt(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 12) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  *out = std::stoll(s);
  return true;
}

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

Result<FaultSpec> ParseFaultSpec(const std::string& spec, int world, int64_t total_steps) {
  FaultSpec f;
  if (spec.empty()) return f;
  std::vector<std::string> parts;
  std::stringstream ss(spec);
  for (std::string p; std::getline(ss, p, ':');) parts.push_back(p);
  if (parts.size() != 3 && !(parts.size() == 4 && parts[2] == "during=checkpoint"))
    return Bad(spec, "wrong number of fields");
  if (parts[0] == "kill")
    f.kind = FaultSpec::Kind::kKill;
  else if (parts[0] == "hang")
    f.kind = FaultSpec::Kind::kHang;
  else
    return Bad(spec, "unknown fault '" + parts[0] + "'");
  int64_t rank = 0;
  if (parts[1].rfind("rank=", 0) != 0 || !ParseInt(parts[1].substr(5), &rank)) return Bad(spec, "bad rank");
  if (rank >= world)
    return Bad(spec, "rank " + std::to_string(rank) + " is not in a world of " + std::to_string(world));
  f.rank = static_cast<int>(rank);
  if (parts[2] == "during=checkpoint") {
    if (f.kind != FaultSpec::Kind::kKill) return Bad(spec, "during=checkpoint is a kill");
    f.during_checkpoint = true;
    if (parts.size() == 3) return f;
  }
  const std::string& step = parts.back();
  if (step.rfind("step=", 0) != 0 || !ParseInt(step.substr(5), &f.step)) return Bad(spec, "bad step");
  if (f.step < 1 || f.step > total_steps)
    return Bad(spec, "step " + std::to_string(f.step) + " is not in this run's 1.." + std::to_string(total_steps));
  return f;
}

void InjectAtStep(const FaultSpec& spec, int rank, int64_t step) {
  if (spec.kind == FaultSpec::Kind::kNone || spec.during_checkpoint || rank != spec.rank || step + 1 != spec.step)
    return;
  if (fired.exchange(true)) return;
  Fire(spec, rank, ("at step " + std::to_string(spec.step)).c_str());
}

void InjectDuringCheckpoint(const FaultSpec& spec, int rank, int64_t step) {
  if (!spec.during_checkpoint || rank != spec.rank || (spec.step != 0 && spec.step != step)) return;
  if (fired.exchange(true)) return;
  Fire(spec, rank, "while writing a checkpoint");
}

}  // namespace lockstep::runtime
