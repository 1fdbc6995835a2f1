#include "lockstep/runtime/recovery/supervisor.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/checkpoint/resolve.h"
#include "lockstep/core/log.h"
#include "lockstep/runtime/metrics/metrics_log.h"
#include "lockstep/runtime/recovery/elastic_recovery.h"
#include "lockstep/runtime/recovery/heartbeat.h"
#include "lockstep/runtime/setup/fault_spec.h"
#include "lockstep/runtime/setup/run_setup.h"

namespace lockstep::runtime {
namespace {

namespace fs = std::filesystem;

std::atomic<int> stop_signal{0};
void OnStopSignal(int sig) { stop_signal.store(sig); }

// The child's command line: the program (TrainOptions::command) and the user's flags minus
// the supervisor's own, with --out made explicit (so every attempt writes to the same place)
// and --resume set per attempt.
std::vector<std::string> ChildArgs(const TrainOptions& o, const std::string& out_dir, const std::string& resume,
                                   bool with_fault) {
  // The program as it was started (a program's own trainer, or "lockstep train").
  std::vector<std::string> a = o.command.empty() ? std::vector<std::string>{"lockstep", "train"} : o.command;
  if (!o.config_path.empty()) a.insert(a.end(), {"--config", o.config_path});
  for (const std::string& s : o.overrides) a.insert(a.end(), {"--set", s});
  a.insert(a.end(), {"--nproc", std::to_string(o.nproc), "--backend", o.backend, "--out", out_dir});
  if (o.steps >= 0) a.insert(a.end(), {"--steps", std::to_string(o.steps)});
  if (o.epochs >= 0) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.17g", o.epochs);
    a.insert(a.end(), {"--epochs", buf});
  }
  if (!resume.empty()) a.insert(a.end(), {"--resume", resume});
  if (o.deterministic) a.push_back("--deterministic");
  if (!o.trace_file.empty()) a.insert(a.end(), {"--trace", o.trace_file});
  if (!o.layout.empty()) a.insert(a.end(), {"--layout", o.layout});
  if (o.zero != 0) a.insert(a.end(), {"--zero", std::to_string(o.zero)});
  if (with_fault && !o.inject_fault.empty()) a.insert(a.end(), {"--inject-fault", o.inject_fault});
  if (o.backend == "hier" && o.hosts.empty() && o.hostfile.empty())
    a.insert(a.end(), {"--workers-per-host", std::to_string(o.workers_per_host)});
  if (!o.hosts.empty()) a.insert(a.end(), {"--hosts", o.hosts});
  if (!o.hostfile.empty()) a.insert(a.end(), {"--hostfile", o.hostfile});
  if (!o.mpi_interface.empty()) a.insert(a.end(), {"--mpi-if", o.mpi_interface});
  if (o.mem_limit > 0) a.insert(a.end(), {"--mem-limit", std::to_string(o.mem_limit)});
  // Every attempt: a restart that finds no checkpoint yet starts from these weights again
  // (one that resumes ignores them).
  if (!o.init_from.empty()) a.insert(a.end(), {"--init-from", o.init_from});
  return a;
}

// Starts the child in its own process group (so the whole job can be signalled at once).
Result<pid_t> Spawn(const std::vector<std::string>& args, const std::string& heartbeat_dir, bool restart) {
  std::vector<char*> argv;
  for (const std::string& s : args) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return Status::IoError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::setenv(kHeartbeatDirEnv, heartbeat_dir.c_str(), 1);
    if (restart)
      ::setenv(kRestartEnv, "1", 1);
    else
      ::unsetenv(kRestartEnv);
    ::execv("/proc/self/exe", argv.data());
    std::fprintf(stderr, "lockstep: supervisor: cannot start the worker: %s\n", std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent: no race with the first kill(-pid)
  return pid;
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return "killed by signal " + std::to_string(sig) + (name ? std::string(" (SIG") + name + ")" : "");
  }
  return "stopped (status " + std::to_string(status) + ")";
}

double SecondsSince(const fs::file_time_type& t) {
  return std::chrono::duration<double>(fs::file_time_type::clock::now() - t).count();
}

// The rank whose heartbeat is oldest, and how old it is; before any rank has beaten, the
// time since launch stands in.
constexpr double kStartupGraceS = 60;

std::pair<std::string, double> StalestHeartbeat(const std::string& dir, double since_launch) {
  std::pair<std::string, double> worst{"", -1};
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    auto t = fs::last_write_time(e.path(), ec);
    if (ec) continue;
    double age = SecondsSince(t);
    if (age > worst.second) worst = {e.path().filename().string(), age};
  }
  if (worst.second < 0) return {"every rank (none has started)", since_launch};
  return worst;
}

// SIGTERM to the whole group (mpirun forwards it and cleans up its ranks), SIGKILL to
// whatever is left after a grace period. Reaps the child if it is still running.
void StopGroup(pid_t pid, bool reaped) {
  ::kill(-pid, SIGTERM);
  for (int i = 0; i < 50 && !reaped; ++i) {
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid)
      reaped = true;
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(-pid, SIGKILL);
  if (!reaped) ::waitpid(pid, nullptr, 0);
}

// The newest complete checkpoint directory (what --resume auto starts from, unless it fails
// verification) and its manifest's modification time ("" if none). Not `latest`: a kill
// between a checkpoint's rename and the update of `latest` leaves a newer complete one.
std::pair<int64_t, std::string> NewestCheckpoint(const std::string& root) {
  auto list = checkpoint::ListCheckpoints(root);
  if (!list.ok() || list->empty()) return {0, ""};
  const auto& [step, dir] = list->back();
  std::error_code ec;
  auto t = fs::last_write_time(dir + "/manifest.json", ec);
  return {step, dir + "@" + std::to_string(ec ? 0 : t.time_since_epoch().count())};
}

std::string LatestIdentity(const std::string& root) { return NewestCheckpoint(root).second; }

// The step the next attempt resumes from (0 if none).
int64_t LatestStep(const std::string& root) { return NewestCheckpoint(root).first; }

// Whether the fault goes to this attempt: the first gets any fault; a permanent kill goes to
// every attempt whose world still has its rank (a lost machine stays lost).
bool FaultFor(const TrainOptions& options, int attempt, int nproc) {
  if (attempt == 0) return true;
  Result<FaultSpec> f = ParseFaultSpec(options.inject_fault, options.nproc, INT64_MAX);
  return f.ok() && f->permanent && f->rank < nproc;
}

void LogWorldChange(const std::string& out_dir, const std::string& root, const WorldChange& c, bool deterministic,
                    bool diloco) {
  const int64_t step = LatestStep(root);
  std::fprintf(stderr, "lockstep: supervisor: world %d -> %d workers from step %lld: %s\n", c.from, c.to,
               static_cast<long long>(step), c.reason.c_str());
  if (diloco)
    std::fprintf(stderr,
                 "lockstep: supervisor: DiLoCo goes on from step %lld with the replicas of a %d-worker world, each "
                 "from its own state in that checkpoint; the others' inner steps since their last synchronisation "
                 "are dropped\n",
                 static_cast<long long>(step), c.to);
  else if (!deterministic)
    std::fprintf(stderr,
                 "lockstep: supervisor: without --deterministic the numbers from step %lld on follow a %d-worker "
                 "run (the same global batch, summed in another order)\n",
                 static_cast<long long>(step), c.to);
  // The row carries the step the next attempt resumes from, so the resumed run keeps it.
  if (Result<MetricsLog> log = MetricsLog::Open(out_dir + "/metrics.jsonl", true); log.ok())
    (void)log->Write(
        {{"event", "world_changed"}, {"from", c.from}, {"to", c.to}, {"step", step}, {"reason", c.reason}});
}

}  // namespace

Status RunSupervised(const TrainOptions& options, const Job& job) {
  const std::string out_dir = OutDirFor(options);
  const std::string heartbeat_dir = out_dir + "/heartbeat";
  const std::string root = out_dir + "/checkpoints";
  std::optional<ElasticRecovery> elastic;
  if (options.min_nproc > 0) {
    LS_ASSIGN_OR_RETURN(ElasticRecovery e, ElasticRecovery::Create(options, job));
    elastic.emplace(std::move(e));
    if (std::string why = elastic->LastStand(); !why.empty())
      std::fprintf(stderr, "lockstep: supervisor: warning: losing a worker will end this run: %s\n", why.c_str());
  }
  std::error_code ec;
  fs::create_directories(heartbeat_dir, ec);
  if (ec) return Status::IoError("cannot create " + heartbeat_dir + ": " + ec.message());
  // A fresh run must not "resume" from an older run's checkpoints left in the same --out:
  // restarts resume only once this run has committed a checkpoint of its own.
  const std::string stale_latest = options.resume.empty() ? LatestIdentity(root) : "";
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);

  std::string last_cause;
  int failures = 0;  // attempts that failed; growing the world is no failure
  for (int attempt = 0;; ++attempt) {
    const TrainOptions& current = elastic ? elastic->current() : options;
    std::string resume = options.resume;
    if (attempt > 0) resume = LatestIdentity(root) == stale_latest ? options.resume : "auto";
    for (const auto& e : fs::directory_iterator(heartbeat_dir, ec)) fs::remove(e.path(), ec);
    const std::string latest_at_launch = LatestIdentity(root);
    LS_ASSIGN_OR_RETURN(pid_t pid, Spawn(ChildArgs(current, out_dir, resume, FaultFor(options, attempt, current.nproc)),
                                         heartbeat_dir, attempt > 0));
    { std::ofstream(out_dir + "/worker.pid", std::ios::trunc) << pid << "\n"; }
    const auto launched = std::chrono::steady_clock::now();
    std::string latest_seen = latest_at_launch;
    int status = 0;
    bool reaped = false;
    std::string cause;
    std::optional<WorldChange> grow;
    while (true) {
      pid_t r = ::waitpid(pid, &status, WNOHANG);
      if (r == pid) {
        reaped = true;
        break;
      }
      if (int sig = stop_signal.load()) {
        StopGroup(pid, false);
        return Status::Aborted(std::string("supervisor stopped by signal SIG") + sigabbrev_np(sig));
      }
      // Growing happens at checkpoint boundaries only: right after a commit, from it.
      if (elastic && elastic->may_grow()) {
        std::string latest = LatestIdentity(root);
        if (latest != latest_seen) {
          latest_seen = latest;
          grow = elastic->GrowAtCheckpoint(LatestStep(root));
          if (grow) break;
        }
      }
      double since_launch = std::chrono::duration<double>(std::chrono::steady_clock::now() - launched).count();
      auto [who, age] = StalestHeartbeat(heartbeat_dir, since_launch);
      // Start-up (process launch, data and checkpoint loading) gets at least kStartupGraceS
      // before the first beat, so a short --heartbeat-timeout does not misfire on a slow start.
      const bool started = who.rfind("every rank", 0) != 0;
      const double limit =
          started ? options.heartbeat_timeout_s : std::max(options.heartbeat_timeout_s, kStartupGraceS);
      if (age > limit) {
        char buf[160];
        std::snprintf(buf, sizeof(buf), "no heartbeat from %s for %.0f s (hung)", who.c_str(), age);
        cause = buf;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (grow) {
      StopGroup(pid, false);
      LogWorldChange(out_dir, root, *grow, options.deterministic, elastic->diloco());
      continue;
    }
    if (reaped && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      ::kill(-pid, SIGKILL);  // nothing should be left; make sure
      return Status::Ok();
    }
    if (reaped && WIFEXITED(status) && WEXITSTATUS(status) == 2)
      return Status::InvalidArgument("");  // bad input: the worker printed the one-line error; not retried
    // A non-finite gradient or loss: the same checkpoint and data would give it again.
    if (reaped && WIFEXITED(status) && WEXITSTATUS(status) == 3) return Status::NonFinite("");
    if (cause.empty()) cause = "worker " + DescribeExit(status);
    StopGroup(pid, reaped);
    last_cause = cause;
    if (failures++ == options.max_restarts) break;
    std::optional<WorldChange> change;
    if (elastic) {
      const bool progressed = LatestIdentity(root) != latest_at_launch;
      Result<std::optional<WorldChange>> next = elastic->AfterFailure(progressed, cause);
      if (!next.ok()) {
        const int64_t step = LatestStep(root);
        std::string keep =
            step > 0 ? "; the checkpoint of step " + std::to_string(step) + " is intact (--resume auto goes on from it)"
                     : "; no checkpoint was committed";
        return Status::Unavailable(next.status().message() + keep);
      }
      change = *next;
    }
    std::string from = LatestIdentity(root) == stale_latest ? "step 0" : "the newest valid checkpoint";
    std::fprintf(stderr, "lockstep: supervisor: %s; restart %d/%d from %s\n", cause.c_str(), failures,
                 options.max_restarts, from.c_str());
    if (Result<MetricsLog> log = MetricsLog::Open(out_dir + "/metrics.jsonl", true); log.ok())
      (void)log->Write({{"event", "restart"}, {"attempt", failures}, {"cause", cause}});
    if (change) LogWorldChange(out_dir, root, *change, options.deterministic, elastic->diloco());
  }
  return Status::Aborted("training failed " + std::to_string(options.max_restarts + 1) +
                         " times; giving up (last: " + last_cause + ")");
}

}  // namespace lockstep::runtime
