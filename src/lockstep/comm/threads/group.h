// Group: the state the ranks of one threads communicator share. One per communicator (the
// world's, and one per Split subgroup), owned jointly by its ranks' communicators.
//
// Arrival protocol. A collective starts with every rank publishing its call and buffer
// pointers in its slot and then arriving on one 64-bit word (seq, count, aborted bit). When
// the count reaches size() the collective is *committed*: from then on every rank is inside
// it and runs it to the end, reading peers' buffers; before that no rank reads any peer's
// buffer. A rank whose wait times out sets the aborted bit only while the collective is
// uncommitted, so a rank that gives up never has its buffers read after it returned.
//
// After commit, ranks synchronise through per-rank phase counters (Signal / WaitAll): every
// rank runs the same number of phases per collective, so the counters stay aligned. These
// waits have no deadline on purpose: every participant is already inside the collective, so
// each phase finishes in bounded time, and returning early would free buffers a peer reads.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "lockstep/comm/call_desc.h"
#include "lockstep/comm/threads/layout.h"
#include "lockstep/comm/threads/wait_word.h"
#include "lockstep/core/status.h"

namespace lockstep::comm::threads {

class Group;

// What a rank publishes for one collective. Double-buffered by sequence parity: a fast rank
// may publish collective s+1 while a slow one still reads collective s, never s+2.
struct Published {
  CallDesc call;
  const void* send = nullptr;
  void* recv = nullptr;
  int split_color = -1;
  int split_key = 0;
  std::shared_ptr<Group> split_group;  // set by the leader of each color
};

// Blocks of this rank's share of a work-shared reduction claimed so far, by collective
// parity (see Group::claims). On its own cache line: the owner bumps it once per block.
struct alignas(64) ClaimCounters {
  std::atomic<uint64_t> next[2] = {0, 0};
};

struct alignas(64) RankSlot {
  WaitWord phase;                        // post-commit phase counter
  std::atomic<uint64_t> arrived_seq{0};  // last collective this rank arrived at
  Published pub[2];
  ClaimCounters claims;
};

struct Message {
  DType dtype;
  std::vector<unsigned char> bytes;
};

enum class ArriveOutcome { kCommitted, kTimedOut, kAborted };

class Group {
 public:
  Group(int size, bool debug);
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int size() const { return size_; }
  bool debug() const { return debug_; }
  int64_t spin_ns() const { return spin_ns_; }
  RankSlot& slot(int rank) { return slots_[rank]; }
  Published& pub(int rank, uint64_t seq) { return slots_[rank].pub[seq & 1]; }

  // Arrives at collective `seq` (1, 2, ...); true when this arrival committed it.
  // *aborted is set when the group was aborted before this rank could arrive.
  bool Arrive(int rank, uint64_t seq, bool* aborted);
  // Waits until collective `seq` is committed (kCommitted), the group is aborted (kAborted;
  // see abort_status(), possibly a peer timing out on this same collective) or deadline_ns
  // passes (kTimedOut: the caller should TryAbortUncommitted).
  ArriveOutcome WaitCommitted(uint64_t seq, int64_t deadline_ns);
  // Aborts the group with `reason` unless collective `seq` got committed meanwhile (then
  // false: the caller must run the collective after all).
  bool TryAbortUncommitted(uint64_t seq, const Status& reason);
  // Ranks that have not arrived at collective `seq` yet.
  std::vector<int> MissingRanks(uint64_t seq) const;

  // Poisons the group: uncommitted and later collectives fail on every rank, and waiting
  // receivers wake. The first reason is kept. `seq` is the collective it happened in (0: none).
  void Abort(const Status& reason, uint64_t seq);
  bool aborted() const;
  // The first abort reason and its collective sequence number.
  std::pair<Status, uint64_t> abort_status() const;

  // Post-commit phases. `phase` is the caller's counter, identical on every rank.
  void Signal(int rank, uint32_t phase) { slots_[rank].phase.Publish(phase); }
  void WaitAll(int rank, uint32_t phase);

  // Work-sharing counter of `rank`'s share of collective `seq`: after commit, each rank
  // claims the blocks of its own share with fetch_add and then those left in its peers'
  // shares, so a rank that runs late (descheduled on a busy machine, or on slower memory) is
  // covered by the others instead of holding them all up, while in the usual balanced case
  // every rank keeps touching the same lines as in the previous call (cache affinity).
  // Double-buffered by parity like pub(): each rank resets its own counter before arriving at
  // `seq`, when every claim of collective seq-2 is over (all ranks finished it before
  // arriving at seq-1) and none of `seq` has begun (claims start after commit).
  std::atomic<uint64_t>& claims(uint64_t seq, int rank) { return slots_[rank].claims.next[seq & 1]; }
  // Calls fn(j) for each block j of [0, blocks) that `rank` claims in collective `seq`: the
  // blocks are cut into size() equal runs, rank r's own run first, then r+1's, ... Every
  // block is claimed by exactly one rank once all ranks have returned.
  template <typename Fn>
  void ForClaimedBlocks(uint64_t seq, int rank, size_t blocks, Fn&& fn) {
    for (int k = 0; k < size_; ++k) {
      const int owner = (rank + k) % size_;
      const Range run = EvenShare(blocks, size_, owner);
      std::atomic<uint64_t>& next = claims(seq, owner);
      for (uint64_t j = run.begin + next.fetch_add(1, std::memory_order_relaxed); j < run.end;
           j = run.begin + next.fetch_add(1, std::memory_order_relaxed)) {
        fn(static_cast<size_t>(j));
      }
    }
  }

  // Mailboxes for Send/Recv: FIFO per (src, dst, tag).
  void Post(int src, int dst, int64_t tag, Message message);
  // Waits for a message; false on deadline or abort (message untouched).
  bool Take(int src, int dst, int64_t tag, int64_t deadline_ns, Message* message);

 private:
  bool Committed(uint64_t state, uint64_t seq) const;
  void WakeEveryone();

  const int size_;
  const bool debug_;
  const int64_t spin_ns_;
  std::unique_ptr<RankSlot[]> slots_;

  std::atomic<uint64_t> arrival_;  // see Pack() in group.cc
  WaitWord arrival_word_;

  mutable std::mutex abort_mu_;
  Status abort_reason_;
  uint64_t abort_seq_ = 0;

  std::mutex mail_mu_;
  std::map<std::tuple<int, int, int64_t>, std::deque<Message>> mail_;
  std::unique_ptr<WaitWord[]> mail_words_;  // one per destination rank
};

}  // namespace lockstep::comm::threads
