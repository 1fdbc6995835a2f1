#include "lockstep/comm/threads/group.h"

#include <thread>

namespace lockstep::comm::threads {

namespace {

// arrival_: bit 63 aborted, bits 16..62 the sequence number of the latest collective any rank
// arrived at, bits 0..15 how many ranks arrived at it. Starts as "collective 0, all arrived".
constexpr uint64_t kAbortBit = uint64_t{1} << 63;
constexpr uint64_t kCountMask = 0xffff;
uint64_t Pack(uint64_t seq, uint64_t count) { return (seq << 16) | count; }
uint64_t SeqOf(uint64_t v) { return (v & ~kAbortBit) >> 16; }
uint64_t CountOf(uint64_t v) { return v & kCountMask; }
bool AbortedBit(uint64_t v) { return (v & kAbortBit) != 0; }

// Spin long enough to catch a peer that is running on another core, but barely at all when
// there are more ranks than cores (the peer we wait for may need our core to get there).
int64_t SpinBudgetNs(int size) {
  unsigned cores = std::thread::hardware_concurrency();
  if (cores == 0) cores = 1;
  return static_cast<unsigned>(size) <= cores ? 50'000 : 2'000;
}

}  // namespace

Group::Group(int size, bool debug)
    : size_(size),
      debug_(debug),
      spin_ns_(SpinBudgetNs(size)),
      slots_(new RankSlot[size]),
      arrival_(Pack(0, static_cast<uint64_t>(size))),
      mail_words_(new WaitWord[size]) {}

bool Group::Committed(uint64_t state, uint64_t seq) const {
  uint64_t s = SeqOf(state);
  return s > seq || (s == seq && CountOf(state) == static_cast<uint64_t>(size_));
}

bool Group::Arrive(int rank, uint64_t seq, bool* aborted) {
  *aborted = false;
  slots_[rank].arrived_seq.store(seq, std::memory_order_seq_cst);
  const uint64_t n = static_cast<uint64_t>(size_);
  uint64_t state = arrival_.load(std::memory_order_acquire);
  uint64_t next;
  do {
    if (AbortedBit(state)) {
      *aborted = true;
      return false;
    }
    uint64_t s = SeqOf(state), c = CountOf(state);
    if (s + 1 == seq && c == n) {
      next = Pack(seq, 1);
    } else if (s == seq && c < n) {
      next = Pack(seq, c + 1);
    } else {
      Abort(Status::Internal("rank " + std::to_string(rank) + " arrived at collective #" + std::to_string(seq) +
                             " while the group is at #" + std::to_string(s)),
            seq);
      *aborted = true;
      return false;
    }
  } while (!arrival_.compare_exchange_weak(state, next, std::memory_order_acq_rel, std::memory_order_acquire));
  if (CountOf(next) == n) {
    arrival_word_.Bump();
    return true;
  }
  return false;
}

ArriveOutcome Group::WaitCommitted(uint64_t seq, int64_t deadline_ns) {
  auto settled = [&] {
    uint64_t v = arrival_.load(std::memory_order_acquire);
    return Committed(v, seq) || AbortedBit(v);
  };
  WaitFor(arrival_word_, settled, deadline_ns, spin_ns_);
  uint64_t v = arrival_.load(std::memory_order_acquire);
  if (Committed(v, seq)) return ArriveOutcome::kCommitted;
  if (AbortedBit(v)) return ArriveOutcome::kAborted;
  return ArriveOutcome::kTimedOut;
}

bool Group::TryAbortUncommitted(uint64_t seq, const Status& reason) {
  {
    std::lock_guard<std::mutex> lock(abort_mu_);
    uint64_t v = arrival_.load(std::memory_order_acquire);
    while (true) {
      if (Committed(v, seq)) return false;
      if (AbortedBit(v)) break;
      if (arrival_.compare_exchange_weak(v, v | kAbortBit, std::memory_order_acq_rel, std::memory_order_acquire)) {
        break;
      }
    }
    if (abort_reason_.ok()) {
      abort_reason_ = reason;
      abort_seq_ = seq;
    }
  }
  WakeEveryone();
  return true;
}

void Group::Abort(const Status& reason, uint64_t seq) {
  {
    std::lock_guard<std::mutex> lock(abort_mu_);
    if (abort_reason_.ok()) {
      abort_reason_ = reason.ok() ? Status::Aborted("aborted") : reason;
      abort_seq_ = seq;
    }
    arrival_.fetch_or(kAbortBit, std::memory_order_acq_rel);
  }
  WakeEveryone();
}

void Group::WakeEveryone() {
  arrival_word_.Bump();
  for (int r = 0; r < size_; ++r) mail_words_[r].Bump();
}

bool Group::aborted() const { return AbortedBit(arrival_.load(std::memory_order_acquire)); }

std::pair<Status, uint64_t> Group::abort_status() const {
  std::lock_guard<std::mutex> lock(abort_mu_);
  return {abort_reason_, abort_seq_};
}

std::vector<int> Group::MissingRanks(uint64_t seq) const {
  std::vector<int> missing;
  for (int r = 0; r < size_; ++r) {
    if (slots_[r].arrived_seq.load(std::memory_order_acquire) < seq) missing.push_back(r);
  }
  return missing;
}

void Group::WaitAll(int rank, uint32_t phase) {
  for (int p = 0; p < size_; ++p) {
    if (p == rank) continue;
    WaitWord& w = slots_[p].phase;
    WaitFor(
        w, [&] { return static_cast<int32_t>(w.value.load(std::memory_order_acquire) - phase) >= 0; }, kNoDeadline,
        spin_ns_);
  }
}

void Group::Post(int src, int dst, int64_t tag, Message message) {
  {
    std::lock_guard<std::mutex> lock(mail_mu_);
    mail_[{src, dst, tag}].push_back(std::move(message));
  }
  mail_words_[dst].Bump();
}

bool Group::Take(int src, int dst, int64_t tag, int64_t deadline_ns, Message* message) {
  WaitWord& word = mail_words_[dst];
  while (true) {
    uint32_t seen = word.value.load(std::memory_order_seq_cst);
    {
      std::lock_guard<std::mutex> lock(mail_mu_);
      auto it = mail_.find({src, dst, tag});
      if (it != mail_.end() && !it->second.empty()) {
        *message = std::move(it->second.front());
        it->second.pop_front();
        if (it->second.empty()) mail_.erase(it);
        return true;
      }
    }
    if (aborted() || NowNanos() >= deadline_ns) return false;
    WaitFor(
        word, [&] { return word.value.load(std::memory_order_acquire) != seen || aborted(); }, deadline_ns, spin_ns_);
  }
}

}  // namespace lockstep::comm::threads
