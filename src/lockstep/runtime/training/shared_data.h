// SharedData: the datasets of a run, loaded once per process and shared read-only by every
// rank thread (ranks as threads would otherwise each hold a copy), and RankData: one rank's
// training and evaluation loaders over them, with batches exposed as nn::ModelInput rows so
// the trainer never needs to know whether it trains on text or images.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "lockstep/data/byte_corpus.h"
#include "lockstep/data/idx_dataset.h"
#include "lockstep/data/loader.h"
#include "lockstep/data/token_corpus.h"
#include "lockstep/nn/model.h"
#include "lockstep/runtime/launch/run_config.h"

namespace lockstep::runtime {

struct SharedData {
  data::DatasetKind kind = data::DatasetKind::kText;
  int64_t context = 0;  // text and tokens: model context T
  std::shared_ptr<const data::ByteCorpus> corpus;
  std::shared_ptr<const data::TokenCorpus> tokens;
  std::shared_ptr<const data::IdxDataset> train_images, test_images;
};

// Loads the datasets the config names. `context` is the model's context length (text,
// tokens), `vocab` its vocabulary (tokens: every id must be below it).
Result<std::shared_ptr<const SharedData>> LoadSharedData(const RunConfig& run, int64_t context, int64_t vocab);

class RankData {
 public:
  static Result<std::unique_ptr<RankData>> Create(std::shared_ptr<const SharedData> shared, const RunConfig& run,
                                                  int rank, int world);

  // Training: loads this rank's share of the next global batch.
  Status NextTrain();
  int64_t train_rows() const;  // rows of the current local batch
  nn::ModelInput TrainRows(int64_t begin, int64_t n) const;
  int64_t StepsPerEpoch() const;
  data::LoaderState State() const;
  Status Restore(const data::LoaderState& state);

  // Evaluation: StartEval() rewinds; NextEval() loads the next local batch and returns false
  // after the last one (every rank sees the same number of batches).
  Status StartEval();
  Result<bool> NextEval();
  int64_t eval_rows() const;  // real rows of the current local eval batch (masked excluded)
  nn::ModelInput EvalRows(int64_t begin, int64_t n) const;

  // Tokens per row (text, tokens: T) or 1 (images): turns rows/s into tokens/s.
  int64_t units_per_row() const { return is_text() ? shared_->context : 1; }
  // A language-model data set (byte text or token files): rows of T token ids.
  bool is_text() const { return shared_->kind != data::DatasetKind::kFashionMnist; }

 private:
  std::shared_ptr<const SharedData> shared_;
  std::unique_ptr<data::Loader<data::TextBatch>> text_train_, text_eval_;
  std::unique_ptr<data::Loader<data::ImageBatch>> image_train_, image_eval_;
  data::TextBatch text_batch_, text_eval_batch_;
  data::ImageBatch image_batch_, image_eval_batch_;
  data::LoaderState eval_start_;
  int64_t eval_batches_done_ = 0;
};

}  // namespace lockstep::runtime
