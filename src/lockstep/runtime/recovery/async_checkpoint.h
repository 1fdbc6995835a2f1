// Asynchronous checkpoint save (checkpoint.async = true, the default). Save() returns at once;
// a background thread first copies the parameters and optimizer state into a staging buffer
// owned by the saver, then writes the checkpoint from that copy while training goes on.
// The state does not change until the next optimizer update, so the copy overlaps the next
// step's forward and backward passes: the trainer calls WaitForSnapshot() just before it
// updates the parameters, and only waits if the copy is not done by then. At most one save is
// in flight: a new Save() first waits for the previous one, so checkpoints commit in step
// order and the staging buffer is reused without reallocating.
//
// With async = false, Save() writes before returning (the same files, the same commit), which
// is what the stall of an async save is measured against.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/core/result.h"
#include "lockstep/parallel/canonical.h"
#include "lockstep/runtime/recovery/checkpointing.h"

namespace lockstep::runtime {

struct SaveReport {
  int64_t step = 0;
  double stall_ms = 0;  // time the training step waited in Save() (snapshot, earlier save)
  double write_ms = 0;  // writing and committing the checkpoint (files fsynced, latest moved)
  int64_t bytes = 0;    // tensor bytes written
  bool async = false;
};

class AsyncCheckpointSaver {
 public:
  AsyncCheckpointSaver(std::string root, int keep, bool async) : root_(std::move(root)), keep_(keep), async_(async) {}
  ~AsyncCheckpointSaver();  // waits for a save in flight (its result is dropped)
  AsyncCheckpointSaver(const AsyncCheckpointSaver&) = delete;
  AsyncCheckpointSaver& operator=(const AsyncCheckpointSaver&) = delete;

  // Starts saving checkpoint contents.step, on every rank that writes: `pieces` are the
  // canonical pieces this rank writes (names prefixed, data live until WaitForSnapshot()
  // returns); the writer thread copies them, writes this rank's shard and, with several
  // writers (shard.world > 1), runs shard.all_ok — which must use a communicator that only the
  // writer threads drive — before rank 0 commits. `bytes`: the whole checkpoint's size, for
  // the report. `finished` receives the report of the previous save if Save had to wait for
  // it; a failure of the previous save is returned. before_commit runs on the writing thread
  // after the shard is on disk, before the commit. `last`: the run's final save, which nothing
  // could overlap with; it is written at once from the live state, without a snapshot copy
  // (as large as the model states).
  Status SavePieces(std::vector<parallel::LocalPiece> pieces, const CheckpointContents& contents,
                    std::function<void()> before_commit, ShardWriteContext shard, int64_t bytes,
                    std::vector<SaveReport>* finished, bool last = false);

  // Blocks until the snapshot of the save in flight (if any) is taken; the wait counts as stall.
  void WaitForSnapshot();

  // The report of a save that has finished since the last call (never blocks), or nullopt.
  std::optional<Result<SaveReport>> Poll();
  // Waits for the save in flight; nullopt when there is none.
  std::optional<Result<SaveReport>> Wait();

 private:
  void Join();

  std::string root_;
  int keep_;
  bool async_;
  std::vector<float> staging_;  // the snapshot of the save in flight: every piece's values, back to back
  std::thread writer_;
  std::atomic<bool> done_{false};
  std::mutex mu_;
  std::condition_variable snapshot_cv_;
  bool snapshot_taken_ = true;  // guarded by mu_
  Status status_;
  SaveReport report_;
};

}  // namespace lockstep::runtime
