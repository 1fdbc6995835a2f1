// MpiChannel: point-to-point messages between threads of different processes over one private
// MPI communicator that any number of threads use at once (MPI_THREAD_MULTIPLE). The
// hierarchical backend uses it between workers at different local indexes of two hosts, who
// share no mpi communicator of their own. As in the mpi backend, a send is staged (copied)
// and returns at once, so it never deadlocks against a send the peer issued first; a receive
// polls against its deadline and a stop flag. Messages of one (peer, tag) arrive in order.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "lockstep/comm/communicator.h"
#include "lockstep/core/result.h"

namespace lockstep::comm {

class MpiChannel {
 public:
  // Collective over `comm`, which must be an mpi backend communicator: a private duplicate of
  // it. Peers are `comm`'s ranks.
  static Result<std::shared_ptr<MpiChannel>> Create(Communicator& comm);
  virtual ~MpiChannel() = default;

  virtual Status Send(const void* buf, size_t bytes, int peer, int tag, int64_t deadline_ns) = 0;
  // Fails with Timeout at the deadline, Aborted once *stop is true (checked while polling).
  virtual Status Recv(void* buf, size_t bytes, int peer, int tag, int64_t deadline_ns,
                      const std::atomic<bool>* stop) = 0;
  // The largest tag MPI takes on this communicator.
  virtual int tag_ub() const = 0;
};

}  // namespace lockstep::comm
