#include "lockstep/comm/mpi/mpi_communicator.h"

#include <climits>
#include <cstdio>
#include <cstdlib>

#include "lockstep/comm/mpi/mpi_comm.h"
#include "lockstep/comm/mpi/mpi_env.h"

namespace lockstep::comm {

Result<std::shared_ptr<Communicator>> CreateMpiCommunicator(const MpiOptions& options) {
  LS_RETURN_IF_ERROR(mpi_detail::EnsureMpiInitialized());
  MPI_Comm comm = MPI_COMM_NULL;
  {
    mpi_detail::MpiCallGuard guard;
    mpi_detail::IgnoreMpiLeaks ignore;
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (rc != MPI_SUCCESS) {
      return Status::Internal("MPI_Comm_dup(MPI_COMM_WORLD) failed: " + mpi_detail::MpiErrorString(rc));
    }
  }
  LS_ASSIGN_OR_RETURN(auto c, mpi_detail::MpiCommunicator::Create(comm, options));
  return std::shared_ptr<Communicator>(std::move(c));
}

void AbortMpi(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

Status NativeMpiAllreduce(Communicator& comm, const void* send, void* recv, size_t count, DType dtype, ReduceOp op) {
  auto* mpi = dynamic_cast<mpi_detail::MpiCommunicator*>(&comm);
  if (mpi == nullptr) return Status::InvalidArgument("NativeMpiAllreduce needs an mpi communicator");
  if (dtype != DType::kF32 && dtype != DType::kI32 && dtype != DType::kI64) {
    return Status::InvalidArgument(std::string("NativeMpiAllreduce: dtype ") + DTypeName(dtype) +
                                   " has no MPI reduction; use f32, i32 or i64");
  }
  MPI_Op mop;
  switch (op) {
    case ReduceOp::kSum:
      mop = MPI_SUM;
      break;
    case ReduceOp::kMax:
      mop = MPI_MAX;
      break;
    case ReduceOp::kMin:
      mop = MPI_MIN;
      break;
    default:
      return Status::InvalidArgument("NativeMpiAllreduce: avg has no MPI operation");
  }
  if (count > static_cast<size_t>(INT_MAX)) return Status::InvalidArgument("count too large");
  mpi_detail::MpiCallGuard guard;
  int rc = MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, static_cast<int>(count),
                         mpi_detail::ElementType(dtype), mop, mpi->mpi_comm());
  if (rc != MPI_SUCCESS) {
    return Status::Internal("MPI_Allreduce failed: " + mpi_detail::MpiErrorString(rc));
  }
  return Status::Ok();
}

}  // namespace lockstep::comm
