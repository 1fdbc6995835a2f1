// Slurm's compressed lists, as a job's environment carries them: SLURM_JOB_NODELIST
// ("node[01-04,07],login") and SLURM_TASKS_PER_NODE / SLURM_JOB_CPUS_PER_NODE ("2(x3),1").
// A run started by sbatch or srun takes its hosts and slots from them, so they expand here
// exactly as Slurm itself does (`scontrol show hostnames`), host order included: mpirun
// numbers ranks in that order.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lockstep/core/result.h"
#include "lockstep/runtime/setup/hosts.h"
#include "lockstep/train_options.h"

namespace lockstep::runtime {

// The most hosts (or nodes) either list may expand to: a larger one is refused before it is
// built, so "n[0-999999999]" costs nothing.
inline constexpr int kMaxSlurmHosts = 65536;

// SLURM_JOB_NODELIST -> host names in Slurm's order. Entries split at commas outside
// brackets; a bracket group holds numbers and lo-hi ranges, each printed as wide as the text
// of its lower bound ("[08-11]" -> 08,09,10,11; "[8-11]" -> 8,9,10,11); text after a group
// is a suffix; several groups expand as a product, the leftmost slowest ("r[1-2]-n[1-2]" ->
// r1-n1,r1-n2,r2-n1,r2-n2). InvalidArgument (one line quoting the list) when it is
// malformed, names more than kMaxSlurmHosts hosts or names a host twice.
Result<std::vector<std::string>> ExpandSlurmHostlist(const std::string& text);

// SLURM_TASKS_PER_NODE (or SLURM_JOB_CPUS_PER_NODE) -> one count a node, "2(x3),1" ->
// {2,2,2,1}, expanded only as written ("4" is one node). InvalidArgument (one line) when it
// is malformed, a count is below 1, or it covers other than `nodes` nodes (the length of
// SLURM_JOB_NODELIST's expansion).
Result<std::vector<int>> ExpandSlurmTasksPerNode(const std::string& text, int nodes);

// Where a process of a Slurm job runs, read from the variables sbatch, salloc and srun set.
struct SlurmJob {
  std::vector<Host> nodes;  // SLURM_JOB_NODELIST, each with its SLURM_TASKS_PER_NODE count as slots
  bool in_step = false;     // started by srun (SLURM_STEP_ID), not the batch script or salloc's shell
  int step_tasks = 1;       // SLURM_STEP_NUM_TASKS
};

// nullopt outside Slurm (no SLURM_JOB_ID); InvalidArgument (one line) for a malformed list.
Result<std::optional<SlurmJob>> ReadSlurmJob();

// `train` inside a Slurm job (after the flags, before ApplyHostsToNproc):
//  - in the batch script (or salloc's shell) of an allocation of several nodes, with neither
//    --hosts nor --hostfile: the hosts are the allocation's nodes, a worker a task
//    (`sbatch -N2 --ntasks-per-node=2` gives 2 hosts of 2 workers); mpirun then starts one
//    process a node through Slurm itself;
//  - in a step of several tasks (`srun --mpi=pmix`): each task is a process of the MPI job;
//    --backend threads becomes hier (every task running its own copy is never meant), and
//    without --nproc each task runs --workers-per-host workers (default 1). Tasks without an
//    MPI plugin (plain `srun`) cannot find each other: InvalidArgument naming --mpi=pmix.
// Nothing outside Slurm.
Status ApplySlurmJob(TrainOptions* options, bool nproc_given);

// The MPI processes of this job on this machine: OMPI_COMM_WORLD_LOCAL_SIZE under mpirun,
// this node's count in SLURM_STEP_TASKS_PER_NODE under srun, else 1.
int LocalMpiProcesses();

// Compute threads a worker from SLURM_CPUS_PER_TASK, for a process of an MPI job running
// `process_workers` workers; 0 when Slurm does not say (no --cpus-per-task, not an MPI job).
// srun's tasks are processes (their CPUs are shared by the process's workers); the tasks of
// an allocation whose batch script ran `train` are workers (they became the hosts' slots).
int SlurmThreadsPerWorker(int process_workers);

// How the supervisor asks whether a node of this allocation still answers (host_probe.h):
// an srun of `true` on that node alone, beside the running job step ("" outside an
// allocation's batch script).
std::string SlurmProbeAgent();

}  // namespace lockstep::runtime
