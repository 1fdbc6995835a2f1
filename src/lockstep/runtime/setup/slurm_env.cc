#include "lockstep/runtime/setup/slurm_env.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <unordered_set>

#include "lockstep/comm/mpi/launch.h"

namespace lockstep::runtime {
namespace {

// `text` in double quotes, control characters escaped so that a message stays one line.
std::string Quoted(const std::string& text) {
  std::string s = "\"";
  for (unsigned char c : text) {
    if (c >= ' ' && c != 0x7f) {
      s += static_cast<char>(c);
      continue;
    }
    char hex[8];
    std::snprintf(hex, sizeof hex, "\\x%02x", c);
    s += hex;
  }
  return s + "\"";
}

// A variable's value, "" when unset.
std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

// A variable holding a count; 0 when unset or not a positive number.
int CountEnv(const char* name) {
  const std::string v = Env(name);
  if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::stoi(v);
}

std::string TooMany() { return "expands to more than " + std::to_string(kMaxSlurmHosts) + " hosts"; }

// 1 to 9 digits into *out: "" when it is one, else what is wrong. Nine digits keep every
// bound and count far inside int64_t (and int).
std::string ParseNumber(const std::string& s, int64_t* out) {
  if (s.empty()) return "a number is missing";
  for (char c : s)
    if (c < '0' || c > '9') return Quoted(s) + " is not a number";
  if (s.size() > 9) return Quoted(s) + " has more than 9 digits";
  *out = std::stoll(s);
  return "";
}

// One bracket group's body ("01-04,07") -> its numbers as text, each as wide as its range's
// lower bound (Slurm's rule). "" when it is well formed, else what is wrong.
std::string ExpandGroup(const std::string& body, std::vector<std::string>* out) {
  const std::string where = " in " + Quoted("[" + body + "]");
  if (body.empty()) return "empty brackets \"[]\"";
  size_t begin = 0;
  while (true) {
    const size_t end = body.find(',', begin);
    const std::string item = body.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    if (item.empty()) return "empty range" + where;
    const size_t dash = item.find('-');
    const std::string lo_text = item.substr(0, dash);
    const std::string hi_text = dash == std::string::npos ? lo_text : item.substr(dash + 1);
    int64_t lo = 0, hi = 0;
    std::string error = ParseNumber(lo_text, &lo);
    if (error.empty()) error = ParseNumber(hi_text, &hi);
    if (!error.empty()) return error + where;
    if (lo > hi) return "range " + Quoted(item) + " runs backwards" + where;
    if (static_cast<int64_t>(out->size()) + (hi - lo + 1) > kMaxSlurmHosts) return TooMany();
    for (int64_t v = lo; v <= hi; ++v) {
      std::string digits = std::to_string(v);
      if (digits.size() < lo_text.size()) digits.insert(0, lo_text.size() - digits.size(), '0');
      out->push_back(std::move(digits));
    }
    if (end == std::string::npos) return "";
    begin = end + 1;
  }
}

}  // namespace

Result<std::vector<std::string>> ExpandSlurmHostlist(const std::string& text) {
  auto fail = [&](const std::string& what) {
    return Status::InvalidArgument("Slurm node list " + Quoted(text) + ": " + what);
  };
  if (text.empty()) return fail("empty list");
  if (text.find_first_of(" \t\n\r\v\f") != std::string::npos) return fail("white space is not allowed");
  std::vector<std::string> hosts;
  std::unordered_set<std::string> seen;
  // The entry being read: its expansions so far, where it began, where its open '[' is.
  std::vector<std::string> names{""};
  size_t entry_begin = 0;
  size_t open = std::string::npos;
  for (size_t i = 0; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : ',';  // the end closes the last entry
    if (open != std::string::npos) {
      if (i == text.size()) return fail("unclosed '['");
      if (c == '[') return fail("nested '['");
      if (c != ']') continue;
      std::vector<std::string> numbers;
      const std::string error = ExpandGroup(text.substr(open + 1, i - open - 1), &numbers);
      if (!error.empty()) return fail(error);
      // Both factors are at most kMaxSlurmHosts, so the product cannot overflow.
      if (hosts.size() + names.size() * numbers.size() > static_cast<size_t>(kMaxSlurmHosts)) return fail(TooMany());
      std::vector<std::string> product;
      product.reserve(names.size() * numbers.size());
      for (const std::string& prefix : names)
        for (const std::string& number : numbers) product.push_back(prefix + number);
      names = std::move(product);
      open = std::string::npos;
    } else if (c == '[') {
      open = i;
    } else if (c == ']') {
      return fail("']' without '['");
    } else if (c == ',') {
      if (i == entry_begin) return fail("empty entry");
      if (hosts.size() + names.size() > static_cast<size_t>(kMaxSlurmHosts)) return fail(TooMany());
      for (std::string& name : names) {
        if (!seen.insert(name).second)
          return Status::InvalidArgument("Slurm node list " + Quoted(text) + " names host " + Quoted(name) + " twice");
        hosts.push_back(std::move(name));
      }
      names = {""};
      entry_begin = i + 1;
    } else {
      for (std::string& name : names) name += c;
    }
  }
  return hosts;
}

Result<std::vector<int>> ExpandSlurmTasksPerNode(const std::string& text, int nodes) {
  auto fail = [&](const std::string& what) {
    return Status::InvalidArgument("SLURM_TASKS_PER_NODE " + Quoted(text) + ": " + what);
  };
  if (text.empty()) return fail("empty list");
  std::vector<int> counts;
  size_t begin = 0;
  while (true) {
    const size_t end = text.find(',', begin);
    const std::string entry = text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    if (entry.empty()) return fail("empty entry");
    // "N" or "N(xM)": N tasks on each of M nodes.
    std::string count = entry, repeat = "1";
    const size_t paren = entry.find('(');
    if (paren != std::string::npos) {
      if (entry.size() < paren + 4 || entry.compare(paren, 2, "(x") != 0 || entry.back() != ')')
        return fail(Quoted(entry) + " is not N or N(xM)");
      count = entry.substr(0, paren);
      repeat = entry.substr(paren + 2, entry.size() - paren - 3);
    }
    int64_t n = 0, m = 0;
    std::string error = ParseNumber(count, &n);
    if (error.empty()) error = ParseNumber(repeat, &m);
    if (!error.empty()) return fail(error + " in " + Quoted(entry));
    if (n < 1 || m < 1) return fail(Quoted(entry) + ": counts must be at least 1");
    if (static_cast<int64_t>(counts.size()) + m > kMaxSlurmHosts)
      return fail("covers more than " + std::to_string(kMaxSlurmHosts) + " nodes");
    counts.insert(counts.end(), static_cast<size_t>(m), static_cast<int>(n));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  if (counts.size() != static_cast<size_t>(nodes))
    return Status::InvalidArgument("SLURM_TASKS_PER_NODE " + Quoted(text) + " gives " + std::to_string(counts.size()) +
                                   " nodes, SLURM_JOB_NODELIST has " + std::to_string(nodes));
  return counts;
}

Result<std::optional<SlurmJob>> ReadSlurmJob() {
  if (Env("SLURM_JOB_ID").empty()) return std::optional<SlurmJob>();
  SlurmJob job;
  // salloc and sbatch name both; srun inside an allocation inherits them.
  std::string list = Env("SLURM_JOB_NODELIST");
  if (list.empty()) list = Env("SLURM_NODELIST");
  if (list.empty())
    return Status::InvalidArgument("SLURM_JOB_ID is set but SLURM_JOB_NODELIST is not: not a Slurm job's environment");
  LS_ASSIGN_OR_RETURN(std::vector<std::string> names, ExpandSlurmHostlist(list));
  std::vector<int> tasks(names.size(), 1);
  if (const std::string per_node = Env("SLURM_TASKS_PER_NODE"); !per_node.empty()) {
    LS_ASSIGN_OR_RETURN(tasks, ExpandSlurmTasksPerNode(per_node, static_cast<int>(names.size())));
  }
  for (size_t i = 0; i < names.size(); ++i) job.nodes.push_back({names[i], tasks[i]});
  job.in_step = !Env("SLURM_STEP_ID").empty();
  job.step_tasks = std::max(1, CountEnv("SLURM_STEP_NUM_TASKS"));
  return std::optional<SlurmJob>(std::move(job));
}

Status ApplySlurmJob(TrainOptions* options, bool nproc_given) {
  // A rank started by mpirun (in a batch script's job: lockstep's own relaunch) gets the hosts
  // on its command line; its Slurm variables are those of mpirun's daemon step.
  if (CountEnv("OMPI_COMM_WORLD_SIZE") > 0) return Status::Ok();
  LS_ASSIGN_OR_RETURN(std::optional<SlurmJob> job, ReadSlurmJob());
  if (!job) return Status::Ok();
  if (job->in_step) {
    if (job->step_tasks <= 1) return Status::Ok();  // one task: an ordinary process on its node
    if (!comm::InsideMpirun())
      return Status::InvalidArgument("srun started " + std::to_string(job->step_tasks) +
                                     " tasks without an MPI plugin, so they cannot find each other: start them "
                                     "with srun --mpi=pmix (srun --mpi=list shows what this Slurm has)");
    if (options->backend == "threads") options->backend = "hier";
    if (!nproc_given) options->nproc = job->step_tasks * std::max(1, options->workers_per_host);
    return Status::Ok();
  }
  if (!options->hosts.empty() || !options->hostfile.empty() || job->nodes.size() < 2) return Status::Ok();
  options->hosts = FormatHosts(job->nodes);
  return Status::Ok();
}

int LocalMpiProcesses() {
  if (const int n = CountEnv("OMPI_COMM_WORLD_LOCAL_SIZE"); n > 0) return n;
  if (!comm::InsideMpirun()) return 1;
  // srun: this node's entry of the step's tasks a node ("2(x3),1"), found by the node's index.
  const int nodes = std::max(1, CountEnv("SLURM_STEP_NUM_NODES"));
  Result<std::vector<int>> tasks = ExpandSlurmTasksPerNode(Env("SLURM_STEP_TASKS_PER_NODE"), nodes);
  const int index = CountEnv("SLURM_NODEID");  // 0 when unset or 0
  if (!tasks.ok() || index >= static_cast<int>(tasks->size())) return 1;
  return (*tasks)[static_cast<size_t>(index)];
}

int SlurmThreadsPerWorker(int process_workers) {
  const int cpus = CountEnv("SLURM_CPUS_PER_TASK");
  if (cpus == 0 || !comm::InsideMpirun()) return 0;
  const bool started_by_srun = CountEnv("OMPI_COMM_WORLD_SIZE") == 0;
  return started_by_srun ? std::max(1, cpus / std::max(1, process_workers)) : cpus;
}

std::string SlurmProbeAgent() {
  if (Env("SLURM_JOB_ID").empty() || !Env("SLURM_STEP_ID").empty()) return "";
  // --overlap: the job's own step (mpirun's daemons) holds the node's CPUs.
  return "srun --nodes=1 --ntasks=1 --overlap --quiet --nodelist";
}

}  // namespace lockstep::runtime
