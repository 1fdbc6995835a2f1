#include "lockstep/runtime/recovery/async_checkpoint.h"

#include <cstring>

#include "lockstep/core/clock.h"
#include "lockstep/runtime/recovery/stage_checkpoint.h"

namespace lockstep::runtime {

AsyncCheckpointSaver::~AsyncCheckpointSaver() { Join(); }

void AsyncCheckpointSaver::Join() {
  if (writer_.joinable()) writer_.join();
}

std::optional<Result<SaveReport>> AsyncCheckpointSaver::Poll() {
  if (!writer_.joinable() || !done_.load(std::memory_order_acquire)) return std::nullopt;
  return Wait();
}

std::optional<Result<SaveReport>> AsyncCheckpointSaver::Wait() {
  if (!writer_.joinable()) return std::nullopt;
  Join();
  if (!status_.ok()) return Result<SaveReport>(status_);
  SaveReport r = report_;
  return Result<SaveReport>(r);
}

Status AsyncCheckpointSaver::SavePieces(std::vector<parallel::LocalPiece> pieces, const CheckpointContents& contents,
                                        std::function<void()> before_commit, ShardWriteContext shard, int64_t bytes,
                                        std::vector<SaveReport>* finished, bool last) {
  Stopwatch stall;
  if (auto previous = Wait()) {
    if (!previous->ok()) return previous->status();
    finished->push_back(**previous);
  }
  if (!async_ || last) {
    Stopwatch write;
    LS_RETURN_IF_ERROR(
        SaveStageCheckpoint(root_, keep_, StagePieces{std::move(pieces)}, contents, before_commit, shard));
    finished->push_back(SaveReport{contents.step, stall.ElapsedMs(), write.ElapsedMs(), bytes, false});
    return Status::Ok();
  }
  report_ = SaveReport{contents.step, stall.ElapsedMs(), 0, bytes, true};
  done_.store(false, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    snapshot_taken_ = false;
  }
  writer_ = std::thread([this, pieces = std::move(pieces), contents, before_commit = std::move(before_commit),
                         shard = std::move(shard)]() mutable {
    Stopwatch write;
    size_t total = 0;
    for (const parallel::LocalPiece& p : pieces) total += static_cast<size_t>(p.count);
    staging_.resize(total);
    size_t at = 0;
    for (parallel::LocalPiece& p : pieces) {
      std::memcpy(staging_.data() + at, p.data, static_cast<size_t>(p.count) * sizeof(float));
      p.data = staging_.data() + at;
      at += static_cast<size_t>(p.count);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      snapshot_taken_ = true;
    }
    snapshot_cv_.notify_all();
    status_ = SaveStageCheckpoint(root_, keep_, StagePieces{std::move(pieces)}, contents, before_commit, shard);
    // The snapshot is not kept between saves: it is as large as the model states, and an
    // allocation on this thread costs the training threads nothing.
    std::vector<float>().swap(staging_);
    report_.write_ms = write.ElapsedMs();
    done_.store(true, std::memory_order_release);
  });
  return Status::Ok();
}

void AsyncCheckpointSaver::WaitForSnapshot() {
  Stopwatch waited;
  std::unique_lock<std::mutex> lock(mu_);
  if (snapshot_taken_) return;
  snapshot_cv_.wait(lock, [this] { return snapshot_taken_; });
  report_.stall_ms += waited.ElapsedMs();
}

}  // namespace lockstep::runtime
