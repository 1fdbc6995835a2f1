// CallDesc: what one rank called, in a fixed-size POD so backends can exchange it (shared
// memory or MPI_Allgather of bytes) and compare it across ranks. Also the message formats that
// every backend uses for timeouts and desyncs, so errors read the same on threads and MPI.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/comm/communicator.h"
#include "lockstep/core/status.h"

namespace lockstep::comm {

struct CallDesc {
  OpKind kind = OpKind::kBarrier;
  DType dtype = DType::kU8;
  ReduceOp op = ReduceOp::kSum;            // meaningful for reductions only
  int32_t root = -1;                       // broadcast/reduce root, send/recv peer, else -1
  uint64_t count = 0;                      // the count argument as the caller passed it
  int64_t aux = 0;                         // deterministic: total_contributions; send/recv: tag
  Algorithm algorithm = Algorithm::kAuto;  // the caller's hint (printed when not auto)
};

// True for kinds that take a ReduceOp.
bool IsReduction(OpKind kind);

// True when `a` and `b` are compatible calls of one collective: same kind, count, dtype,
// root, reduce op (reductions) and aux (deterministic). Algorithm hints may differ.
bool SameCall(const CallDesc& a, const CallDesc& b);

// "allreduce(count=4, f32, sum)", "broadcast(count=4, f32, root=0)", "barrier()",
// "deterministic_allreduce(count=8, f32, contributions=16)", "split()".
std::string Describe(const CallDesc& d);

// "collective #3 desync: rank 0 called allreduce(count=4, f32, sum), rank 1 called
// broadcast(count=4, f32, root=0)". calls[r] is rank r's call.
std::string DesyncMessage(uint64_t seq, const std::vector<CallDesc>& calls);

// "rank 0: collective allreduce #7 (count=4, dtype=f32) timed out after 1.00 s waiting for
// rank(s) 1, 3". `missing` may be empty when the backend cannot tell who is late (then the
// tail is "waiting for peers").
std::string TimeoutMessage(int rank, const CallDesc& d, uint64_t seq, std::chrono::nanoseconds waited,
                           const std::vector<int>& missing);

// "rank 0: recv from rank 1 (tag=5, count=4, dtype=f32) timed out after 0.20 s".
std::string P2PTimeoutMessage(int rank, const CallDesc& d, std::chrono::nanoseconds waited);

// Checks the arguments of a call against the world shape; InvalidArgument names the
// collective, the argument and what was expected. `send`/`recv` are the caller's pointers
// (null is fine when the corresponding byte count is 0, and for recv on non-root of reduce).
Status ValidateCall(const CallDesc& d, int rank, int size, const void* send, const void* recv);

}  // namespace lockstep::comm
