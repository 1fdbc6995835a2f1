// A network namespace of its own for a one-machine MPI job (launch.h, ConfigureMpiNetwork):
// only the loopback interface, up. Internal to the MPI launcher.
#pragma once

#include <string>

namespace lockstep::comm {

// Moves the calling process into a new network namespace whose only interface is `lo` (brought
// up), so that whatever it and its children listen on is reachable from this machine's loopback
// only. As root (CAP_SYS_ADMIN) a plain new network namespace; otherwise inside a new user
// namespace that maps the caller's uid and gid to themselves. Returns "" on success, else why
// it could not (the process is then unchanged, or only its user namespace is new).
// Meant for a freshly forked child before exec: it makes only system calls.
std::string EnterPrivateNetwork();

}  // namespace lockstep::comm
