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

Status AsyncCheckpointSaver::Save(const nn::ParameterStore& params, const std::vector<OptimizerStateBuffer>& optimizer,
                                  const CheckpointContents& contents, std::function<void()> before_commit,
                                  std::vector<SaveReport>* finished) {
  Stopwatch stall;
  if (auto previous = Wait()) {
    if (!previous->ok()) return previous->status();
    finished->push_back(**previous);
  }
  const int64_t n = params.numel();
  const int64_t bytes = n * static_cast<int64_t>(sizeof(float)) * static_cast<int64_t>(1 + optimizer.size());
  if (!async_) {
    Stopwatch write;
    LS_RETURN_IF_ERROR(SaveCheckpoint(root_, keep_, params, optimizer, contents, before_commit));
    SaveReport r{contents.step, stall.ElapsedMs(), write.ElapsedMs(), bytes, false};
    finished->push_back(r);
    return Status::Ok();
  }
  layout_ = &params;
  report_ = SaveReport{contents.step, stall.ElapsedMs(), 0, bytes, true};
  done_.store(false, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    snapshot_taken_ = false;
  }
  writer_ = std::thread([this, n, optimizer, contents, before_commit = std::move(before_commit)] {
    Stopwatch write;
    // Allocated here, not in Save(): the first save's page faults stay off the training thread.
    staging_.resize(static_cast<size_t>(n) * (1 + optimizer.size()));
    std::memcpy(staging_.data(), layout_->flat_params(), static_cast<size_t>(n) * sizeof(float));
    staged_optimizer_.clear();
    for (size_t i = 0; i < optimizer.size(); ++i) {
      float* dst = staging_.data() + static_cast<size_t>(n) * (i + 1);
      std::memcpy(dst, optimizer[i].values.data(), static_cast<size_t>(n) * sizeof(float));
      staged_optimizer_.push_back({optimizer[i].kind, std::span<float>(dst, static_cast<size_t>(n))});
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      snapshot_taken_ = true;
    }
    snapshot_cv_.notify_all();
    status_ = SaveCheckpointFrom(root_, keep_, *layout_, staging_.data(), staged_optimizer_, contents, before_commit);
    report_.write_ms = write.ElapsedMs();
    done_.store(true, std::memory_order_release);
  });
  return Status::Ok();
}

Status AsyncCheckpointSaver::SavePieces(std::vector<parallel::LocalPiece> pieces, const CheckpointContents& contents,
                                        std::function<void()> before_commit, ShardWriteContext shard, int64_t bytes,
                                        std::vector<SaveReport>* finished) {
  Stopwatch stall;
  if (auto previous = Wait()) {
    if (!previous->ok()) return previous->status();
    finished->push_back(**previous);
  }
  if (!async_) {
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
