// Hosts of a multi-machine MPI run: `--hosts h1:2,h2:2` or `--hostfile FILE` (OpenMPI's
// format, "NAME slots=N" a line, '#' comments). lockstep writes the list it runs on into
// <out>/hostfile and hands that to mpirun, which numbers ranks in hostfile order (host 1's
// slots first). The supervisor (--min-nproc) keeps its own copy, leaves out a host that no
// longer answers and passes the survivors to the next attempt as --hosts.
#pragma once

#include <string>
#include <vector>

#include "lockstep/comm/mpi/launch.h"
#include "lockstep/core/result.h"
#include "lockstep/train_options.h"

namespace lockstep::runtime {

struct Host {
  std::string name;
  int slots = 1;
};

// "h1:2,h2:2" (":N" optional, default 1 slot). InvalidArgument naming the bad entry.
Result<std::vector<Host>> ParseHosts(const std::string& text);
// An OpenMPI hostfile: "NAME [slots=N] ..." lines; other keys are ignored, '#' starts a comment.
Result<std::vector<Host>> ReadHostfile(const std::string& path);
// The inverse of ParseHosts.
std::string FormatHosts(const std::vector<Host>& hosts);
int TotalSlots(const std::vector<Host>& hosts);

// The hosts of `options` (--hosts or --hostfile; empty when neither is given).
Result<std::vector<Host>> HostsOf(const TrainOptions& options);

// One process a host (--backend hier) needs the same workers on every host: InvalidArgument
// (one line naming the hosts) otherwise.
Status CheckEqualSlots(const std::vector<Host>& hosts);

// Writes `hosts` as an OpenMPI hostfile at `path` ("# header", then "NAME slots=N" a line; N is
// 1 with one_process_a_host, whose workers are threads). IoError when it cannot.
Status WriteHostfile(const std::string& path, const std::vector<Host>& hosts, bool one_process_a_host,
                     const std::string& header);

// WriteHostfile into a new file /tmp/lockstep-<tag>-hosts.XXXXXX (mkstemp), whose path it
// returns: the caller removes it once mpirun is done. IoError (the file removed) when it cannot.
Result<std::string> WriteTempHostfile(const std::string& tag, const std::vector<Host>& hosts, bool one_process_a_host,
                                      const std::string& header);

// --mpi-if's default for these hosts: the interface on their subnet (comm::InterfaceReaching).
Result<std::string> InterfaceReaching(const std::vector<Host>& hosts);

// Checks the host and elastic flags against each other (one line each, InvalidArgument):
// hosts need --backend mpi, --hosts and --hostfile exclude each other, --min-nproc and
// --max-nproc need --max-restarts. With hosts and no --nproc, the world is every slot.
Status ApplyHostsToNproc(TrainOptions* options, bool nproc_given);

// For `train --backend mpi` outside mpirun with hosts: writes <out>/hostfile and adds
// "--hostfile <it>" (and -x for the supervisor's variables, which mpirun does not pass to
// other machines by itself) to `mpirun`'s arguments. Nothing without hosts.
// InvalidArgument when --nproc exceeds the slots, or the path holds a space.
Status AddHostfileToMpirun(const TrainOptions& options, comm::MpirunSetup* mpirun);

}  // namespace lockstep::runtime
