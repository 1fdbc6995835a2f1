// StatusBoard: a few bytes per rank in POSIX shared memory, visible to every rank of one
// communicator when they all run on one machine. MPI cannot say which peer a stuck
// collective waits for, nor tell a peer that this rank gave up; the board can:
//  - each rank stores the sequence number of the collective it last started, so a timeout
//    names the ranks that never arrived ("waiting for rank(s) 1");
//  - a rank whose communicator is poisoned (timeout, desync, Abort) raises its flag with the
//    reason, and peers blocked in the same communicator fail at once instead of waiting out
//    their own timeouts.
// On several machines there is no board (Create returns an inactive one) and messages say
// "waiting for peers". Thread-safe: all fields are atomics or written before a release store.
#pragma once

#include "lockstep/comm/mpi/mpi_include.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/core/status.h"

namespace lockstep::comm::mpi_detail {

class StatusBoard {
 public:
  // Collective over `comm` (blocking MPI calls; call where every rank is known to arrive,
  // e.g. right after creating the communicator). Never fails: without shared memory the
  // board is inactive.
  static std::unique_ptr<StatusBoard> Create(MPI_Comm comm, int rank, int size);
  ~StatusBoard();
  StatusBoard(const StatusBoard&) = delete;
  StatusBoard& operator=(const StatusBoard&) = delete;

  bool active() const { return slots_ != nullptr; }

  // This rank began collective `seq`.
  void Started(uint64_t seq);
  // Ranks whose last started collective is before `seq` (empty when inactive).
  std::vector<int> RanksBefore(uint64_t seq) const;

  // Raises this rank's poisoned flag with `reason` (first call wins).
  void Poison(const std::string& reason);
  // Cheap check for any raised flag but ours.
  bool AnyPeerPoisoned() const;
  // The lowest peer rank with a raised flag and its reason.
  std::optional<std::pair<int, std::string>> PoisonedPeer() const;

 private:
  static constexpr size_t kReasonBytes = 240;
  struct alignas(64) Slot {
    std::atomic<uint64_t> started_seq;
    std::atomic<uint32_t> poisoned;
    char reason[kReasonBytes];
  };
  StatusBoard(int rank, int size) : rank_(rank), size_(size) {}

  int rank_;
  int size_;
  Slot* slots_ = nullptr;
  size_t map_bytes_ = 0;
  // One shared word: the number of raised flags, so the poll loop reads one cache line.
  std::atomic<uint32_t>* poisoned_count_ = nullptr;
};

}  // namespace lockstep::comm::mpi_detail
