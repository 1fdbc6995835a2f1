#include "lockstep/comm/mpi/mpi_channel.h"

#include <cstring>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/comm/mpi/mpi_comm.h"
#include "lockstep/comm/mpi/mpi_env.h"
#include "lockstep/core/clock.h"

namespace lockstep::comm {
namespace {

using mpi_detail::MpiCallGuard;

class Channel final : public MpiChannel, public mpi_detail::MpiResource {
 public:
  Channel(MPI_Comm comm, int tag_ub) : comm_(comm), tag_ub_(tag_ub) { mpi_detail::RegisterResource(this); }
  ~Channel() override {
    Shutdown();
    mpi_detail::UnregisterResource(this);
  }

  Status Send(const void* buf, size_t bytes, int peer, int tag, int64_t deadline_ns) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (comm_ == MPI_COMM_NULL) return Status::Aborted("mpi channel: shut down");
    Staged& s = staged_.emplace_back();
    s.bytes.resize(bytes);
    if (bytes > 0) std::memcpy(s.bytes.data(), buf, bytes);
    s.deadline_ns = deadline_ns;
    MpiCallGuard guard;
    int rc = MPI_Isend(s.bytes.data(), static_cast<int>(bytes), MPI_BYTE, peer, tag, comm_, &s.req);
    if (rc != MPI_SUCCESS) {
      staged_.pop_back();
      return Status::Internal("mpi channel: MPI_Isend to " + std::to_string(peer) + ": " +
                              mpi_detail::MpiErrorString(rc));
    }
    ServiceLocked(false);
    return Status::Ok();
  }

  Status Recv(void* buf, size_t bytes, int peer, int tag, int64_t deadline_ns,
              const std::atomic<bool>* stop) override {
    MPI_Request req = MPI_REQUEST_NULL;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (comm_ == MPI_COMM_NULL) return Status::Aborted("mpi channel: shut down");
      MpiCallGuard guard;
      int rc = MPI_Irecv(buf, static_cast<int>(bytes), MPI_BYTE, peer, tag, comm_, &req);
      if (rc != MPI_SUCCESS)
        return Status::Internal("mpi channel: MPI_Irecv from " + std::to_string(peer) + ": " +
                                mpi_detail::MpiErrorString(rc));
    }
    for (int spins = 0;; ++spins) {
      int flag = 0;
      MPI_Status status;
      {
        MpiCallGuard guard;
        MPI_Test(&req, &flag, &status);
      }
      if (flag) {
        int got = 0;
        MPI_Get_count(&status, MPI_BYTE, &got);
        if (static_cast<size_t>(got) != bytes)
          return Status::InvalidArgument("mpi channel: message from " + std::to_string(peer) + " (tag " +
                                         std::to_string(tag) + ") has " + std::to_string(got) + " bytes, expected " +
                                         std::to_string(bytes));
        return Status::Ok();
      }
      const bool stopped = stop != nullptr && stop->load(std::memory_order_acquire);
      if (stopped || NowNanos() > deadline_ns) {
        MpiCallGuard guard;
        MPI_Cancel(&req);
        MPI_Request_free(&req);
        return stopped ? Status::Aborted("mpi channel: receive from " + std::to_string(peer) + " abandoned")
                       : Status::Timeout("mpi channel: receive from process " + std::to_string(peer) + " (tag " +
                                         std::to_string(tag) + ") timed out");
      }
      if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
      if (spins % 64 == 0) {
        std::lock_guard<std::mutex> lock(mu_);
        ServiceLocked(false);
      }
    }
  }

  int tag_ub() const override { return tag_ub_; }

  void ShutdownBeforeFinalize() override { Shutdown(); }

 private:
  struct Staged {
    MPI_Request req = MPI_REQUEST_NULL;
    std::vector<unsigned char> bytes;
    int64_t deadline_ns = 0;
  };

  // Tests the staged sends; with `drain`, waits for each until its deadline.
  void ServiceLocked(bool drain) {
    for (auto it = staged_.begin(); it != staged_.end();) {
      int flag = 0;
      for (;;) {
        {
          MpiCallGuard guard;
          MPI_Test(&it->req, &flag, MPI_STATUS_IGNORE);
        }
        if (flag || !drain || NowNanos() > it->deadline_ns) break;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      if (flag) {
        it = staged_.erase(it);
      } else if (drain) {
        mpi_detail::NoteAbandonedRequests(1);
        mpi_detail::KeepForever(std::make_shared<std::vector<unsigned char>>(std::move(it->bytes)));
        it = staged_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void Shutdown() {
    std::lock_guard<std::mutex> lock(mu_);
    if (comm_ == MPI_COMM_NULL || mpi_detail::MpiFinalized()) return;
    ServiceLocked(true);
    MpiCallGuard guard;
    mpi_detail::IgnoreMpiLeaks ignore;
    MPI_Comm_free(&comm_);
    comm_ = MPI_COMM_NULL;
  }

  std::mutex mu_;  // staged_ and the communicator's lifetime
  MPI_Comm comm_;
  const int tag_ub_;
  std::list<Staged> staged_;
};

}  // namespace

Result<std::shared_ptr<MpiChannel>> MpiChannel::Create(Communicator& comm) {
  auto* mpi = dynamic_cast<mpi_detail::MpiCommunicator*>(&comm);
  if (mpi == nullptr)
    return Status::InvalidArgument(std::string("mpi channel: needs an mpi communicator, not ") + comm.backend_name());
  // Nothing may be pending on `comm` while it is duplicated: a barrier drains its queue.
  LS_RETURN_IF_ERROR(comm.Barrier()->Wait());
  MPI_Comm dup = MPI_COMM_NULL;
  int tag_ub = 32767;
  {
    MpiCallGuard guard;
    mpi_detail::IgnoreMpiLeaks ignore;
    int rc = MPI_Comm_dup(mpi->mpi_comm(), &dup);
    if (rc != MPI_SUCCESS) return Status::Internal("mpi channel: MPI_Comm_dup: " + mpi_detail::MpiErrorString(rc));
    int* ub = nullptr;
    int found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found);  // predefined: cached on the world only
    if (found && ub != nullptr) tag_ub = *ub;
  }
  return std::shared_ptr<MpiChannel>(std::make_shared<Channel>(dup, tag_ub));
}

}  // namespace lockstep::comm
