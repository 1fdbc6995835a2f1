#include "lockstep/comm/mpi/status_board.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <new>

#include "lockstep/comm/mpi/mpi_env.h"

namespace lockstep::comm::mpi_detail {
namespace {

std::atomic<uint64_t> g_board_counter{0};

}  // namespace

std::unique_ptr<StatusBoard> StatusBoard::Create(MPI_Comm comm, int rank, int size) {
  std::unique_ptr<StatusBoard> board(new StatusBoard(rank, size));
  static_assert(std::atomic<uint64_t>::is_always_lock_free, "board needs lock-free atomics");
  MpiCallGuard guard;
  IgnoreMpiLeaks ignore;
  // All ranks on one machine? (Shared memory across machines does not exist.)
  MPI_Comm node = MPI_COMM_NULL;
  int node_size = 0;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) != MPI_SUCCESS) {
    return board;
  }
  MPI_Comm_size(node, &node_size);
  MPI_Comm_free(&node);
  if (node_size != size) return board;

  const size_t bytes = 64 + sizeof(Slot) * static_cast<size_t>(size);
  char name[64] = {0};
  int fd = -1;
  if (rank == 0) {
    std::snprintf(name, sizeof(name), "/lockstep-board-%d-%llu", static_cast<int>(getpid()),
                  static_cast<unsigned long long>(g_board_counter.fetch_add(1)));
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0 && ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      close(fd);
      shm_unlink(name);
      fd = -1;
    }
    if (fd < 0) name[0] = '\0';
  }
  MPI_Bcast(name, sizeof(name), MPI_CHAR, 0, comm);
  void* map = MAP_FAILED;
  if (name[0] != '\0') {
    if (rank != 0) fd = shm_open(name, O_RDWR, 0600);
    if (fd >= 0) {
      map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      close(fd);
    }
  }
  int ok = map != MAP_FAILED ? 1 : 0, all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);  // also: everyone has mapped it
  if (rank == 0 && name[0] != '\0') shm_unlink(name);      // lives on while mapped
  if (!all_ok) {
    if (map != MAP_FAILED) munmap(map, bytes);
    return board;
  }
  // ftruncate zero-fills, and zero bytes are valid atomics holding 0.
  board->map_bytes_ = bytes;
  board->poisoned_count_ = static_cast<std::atomic<uint32_t>*>(map);
  board->slots_ = reinterpret_cast<Slot*>(static_cast<char*>(map) + 64);
  return board;
}

StatusBoard::~StatusBoard() {
  if (poisoned_count_ != nullptr) munmap(static_cast<void*>(poisoned_count_), map_bytes_);
}

void StatusBoard::Started(uint64_t seq) {
  if (slots_) slots_[rank_].started_seq.store(seq, std::memory_order_release);
}

std::vector<int> StatusBoard::RanksBefore(uint64_t seq) const {
  std::vector<int> out;
  if (!slots_) return out;
  for (int r = 0; r < size_; ++r) {
    if (slots_[r].started_seq.load(std::memory_order_acquire) < seq) out.push_back(r);
  }
  return out;
}

void StatusBoard::Poison(const std::string& reason) {
  if (!slots_) return;
  Slot& s = slots_[rank_];
  uint32_t expected = 0;  // 0 -> 2 (writing the reason) -> 1 (raised)
  if (!s.poisoned.compare_exchange_strong(expected, 2, std::memory_order_acq_rel)) return;
  const size_t n = reason.size() < kReasonBytes - 1 ? reason.size() : kReasonBytes - 1;
  std::memcpy(s.reason, reason.data(), n);
  s.reason[n] = '\0';
  s.poisoned.store(1, std::memory_order_release);
  poisoned_count_->fetch_add(1, std::memory_order_acq_rel);
}

bool StatusBoard::AnyPeerPoisoned() const {
  if (!slots_) return false;
  uint32_t n = poisoned_count_->load(std::memory_order_acquire);
  if (n == 0) return false;
  return n > 1 || slots_[rank_].poisoned.load(std::memory_order_acquire) != 1;
}

std::optional<std::pair<int, std::string>> StatusBoard::PoisonedPeer() const {
  if (!slots_) return std::nullopt;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    if (slots_[r].poisoned.load(std::memory_order_acquire) == 1) {
      return std::make_pair(r, std::string(slots_[r].reason));
    }
  }
  return std::nullopt;
}

}  // namespace lockstep::comm::mpi_detail
