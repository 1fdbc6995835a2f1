// RankData: one rank's training and evaluation loaders over a job's data sources (loaded once
// per process and shared read-only by every rank thread), with batches exposed as
// nn::ModelInput rows so the trainer never needs to know what a sample holds.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "lockstep/data/source_loader.h"
#include "lockstep/nn/model.h"
#include "lockstep/job.h"
#include "lockstep/runtime/setup/run_config.h"

namespace lockstep::runtime {

class RankData {
 public:
  static Result<std::unique_ptr<RankData>> Create(const DataSources& sources, const RunConfig& run, int rank,
                                                  int world);

  // Training: loads this rank's share of the next global batch.
  Status NextTrain();
  int64_t train_rows() const { return train_batch_.B; }  // rows of the current local batch
  // Targets of the current local batch the loss counts (>= 0: a loss mask makes some -1).
  int64_t TrainedTargets() const;
  nn::ModelInput TrainRows(int64_t begin, int64_t n) const { return Rows(train_batch_, begin, n); }
  int64_t StepsPerEpoch() const { return train_->StepsPerEpoch(); }
  data::LoaderState State() const { return train_->State(); }
  Status Restore(const data::LoaderState& state) { return train_->Restore(state); }

  // Evaluation: StartEval() rewinds; NextEval() loads the next local batch and returns false
  // after the last one (every rank sees the same number of batches: eval.batches caps them).
  Status StartEval();
  Result<bool> NextEval();
  int64_t eval_rows() const { return eval_batch_.valid; }    // real rows (masked excluded)
  int64_t eval_batch_size() const { return eval_batch_.B; }  // real and masked rows
  nn::ModelInput EvalRows(int64_t begin, int64_t n) const { return Rows(eval_batch_, begin, n); }

  const SampleLayout& layout() const { return layout_; }
  // Tokens per row (token sequences: seq) or 1: turns rows/s into tokens/s.
  int64_t units_per_row() const { return layout_.seq > 0 ? layout_.seq : 1; }
  bool is_text() const { return layout_.seq > 0; }
  bool is_classifier() const { return layout_.classes > 0; }

 private:
  static nn::ModelInput Rows(const data::Batch& b, int64_t begin, int64_t n);

  SampleLayout layout_;
  std::unique_ptr<data::BatchLoader> train_, eval_;
  data::Batch train_batch_, eval_batch_;
  data::LoaderState eval_start_;
  int64_t eval_batches_ = 0;  // per evaluation pass
  int64_t eval_batches_done_ = 0;
};

}  // namespace lockstep::runtime
