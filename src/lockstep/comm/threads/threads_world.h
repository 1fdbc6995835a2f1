// The threads backend: N ranks as threads of one process, sharing memory. Ranks publish
// pointers to their buffers and read/reduce directly from each other's buffers (no staging
// copies). Each rank's communicator has its own progress thread; an operation is executed by
// whichever comes first: the progress thread, or the caller inside Wait().
//
// Usage:
//   ThreadsWorld world(4);
//   // on thread r:
//   std::shared_ptr<Communicator> comm = world.Rank(r);
//   comm->Allreduce(buf, buf, n, DType::kF32, ReduceOp::kSum)->Wait();
//
// Thread-safety: ThreadsWorld is immutable after construction; each rank's communicator is
// driven by one thread at a time. The communicators outlive the world if callers keep them.
#pragma once

#include <memory>
#include <vector>

#include "lockstep/comm/communicator.h"

namespace lockstep::comm {

struct ThreadsWorldOptions {
  // Check before each collective that all ranks called the same one (op, count, dtype, root,
  // reduce op). The threads backend always checks what memory safety needs (op, count, dtype,
  // root, contributions); this adds the reduce op. Default: LOCKSTEP_DEBUG_COLLECTIVES.
  bool debug_collectives = DebugCollectivesFromEnv();
};

class ThreadsWorld {
 public:
  static constexpr int kMaxSize = 4096;
  // InvalidArgument unless 1 <= world_size <= kMaxSize.
  static Result<std::unique_ptr<ThreadsWorld>> Create(int world_size, const ThreadsWorldOptions& options = {});
  // world_size is clamped to [1, kMaxSize]; use Create() for sizes that come from users.
  explicit ThreadsWorld(int world_size, const ThreadsWorldOptions& options = {});
  ~ThreadsWorld();
  ThreadsWorld(const ThreadsWorld&) = delete;
  ThreadsWorld& operator=(const ThreadsWorld&) = delete;

  int size() const { return static_cast<int>(ranks_.size()); }
  // The communicator of rank r, 0 <= r < size(); the same object on every call.
  std::shared_ptr<Communicator> Rank(int r) const;

 private:
  std::vector<std::shared_ptr<Communicator>> ranks_;
};

// The communicators of a fresh world of n ranks (element r is rank r).
std::vector<std::shared_ptr<Communicator>> CreateThreadsGroup(int n, const ThreadsWorldOptions& options = {});

}  // namespace lockstep::comm
