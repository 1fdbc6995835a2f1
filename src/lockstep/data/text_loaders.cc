#include "lockstep/data/text_loaders.h"

#include <algorithm>
#include <string>

#include "lockstep/core/rng.h"
#include "lockstep/data/source_loader.h"

namespace lockstep::data {
namespace {

// One source class for both splits: they differ only in where window k starts.
class CorpusWindowSource final : public DataSource {
 public:
  CorpusWindowSource(std::shared_ptr<const ByteCorpus> corpus, bool train, int64_t context, int64_t windows)
      : corpus_(std::move(corpus)),
        split_(train ? corpus_->train() : corpus_->val()),
        train_(train),
        context_(context),
        windows_(windows) {}

  int64_t size() const override { return windows_; }
  SampleLayout layout() const override { return {.seq = context_, .vocab = 256}; }
  Status Read(const SampleKey& key, const SampleSlot& out) const override {
    const int64_t t = context_;
    const int64_t offset = train_ ? TrainWindowOffset(key.seed, key.epoch, t) : 0;
    const uint8_t* w = split_.data() + offset + key.index * t;
    for (int64_t i = 0; i < t; ++i) {
      out.tokens[i] = w[i];
      out.targets[i] = w[i + 1];
    }
    return Status::Ok();
  }

 private:
  std::shared_ptr<const ByteCorpus> corpus_;  // keeps split_ alive
  std::span<const uint8_t> split_;
  bool train_;
  int64_t context_, windows_;
};

// The text batches of a source loader (the same rows, under the text batch's names).
class TextBatchLoader final : public TextLoader {
 public:
  explicit TextBatchLoader(std::unique_ptr<BatchLoader> inner) : inner_(std::move(inner)) {}

  Status Next(TextBatch* batch) override {
    LS_RETURN_IF_ERROR(inner_->Next(&rows_));
    batch->x.swap(rows_.tokens);
    batch->y.swap(rows_.targets);
    batch->B = rows_.B;
    batch->T = rows_.layout.seq;
    batch->valid = rows_.valid;
    return Status::Ok();
  }
  LoaderState State() const override { return inner_->State(); }
  Status Restore(const LoaderState& state) override { return inner_->Restore(state); }
  int64_t StepsPerEpoch() const override { return inner_->StepsPerEpoch(); }

 private:
  std::unique_ptr<BatchLoader> inner_;
  Batch rows_;
};

}  // namespace

int64_t TrainWindowsPerEpoch(int64_t train_len, int64_t context) { return train_len / context - 1; }

int64_t TrainWindowOffset(uint64_t seed, int64_t epoch, int64_t context) {
  Rng rng(seed, kWindowOffsetStream + static_cast<uint64_t>(epoch));
  return static_cast<int64_t>(rng.Below(static_cast<uint64_t>(context)));
}

int64_t ValWindowCount(int64_t val_len, int64_t context) { return (val_len - 1) / context; }

Result<std::shared_ptr<const DataSource>> TextTrainSource(std::shared_ptr<const ByteCorpus> corpus, int64_t context) {
  LS_RETURN_IF_ERROR(CheckCorpusFitsContext(*corpus, context));
  const int64_t windows = TrainWindowsPerEpoch(static_cast<int64_t>(corpus->train().size()), context);
  return std::shared_ptr<const DataSource>(
      std::make_shared<CorpusWindowSource>(std::move(corpus), true, context, windows));
}

Result<std::shared_ptr<const DataSource>> TextValSource(std::shared_ptr<const ByteCorpus> corpus, int64_t context,
                                                        int64_t max_windows) {
  LS_RETURN_IF_ERROR(CheckCorpusFitsContext(*corpus, context));
  int64_t windows = ValWindowCount(static_cast<int64_t>(corpus->val().size()), context);
  if (max_windows > 0) windows = std::min(windows, max_windows);
  return std::shared_ptr<const DataSource>(
      std::make_shared<CorpusWindowSource>(std::move(corpus), false, context, windows));
}

Status CheckValWindows(const ByteCorpus& corpus, int64_t context, const SamplerOptions& sampling) {
  const int64_t windows = ValWindowCount(static_cast<int64_t>(corpus.val().size()), context);
  if (windows >= sampling.global_batch) return Status::Ok();
  return Status::InvalidArgument(sampling.batch_key + " " + std::to_string(sampling.global_batch) +
                                 " is larger than the " + std::to_string(windows) + " validation windows of " +
                                 std::to_string(context) + " bytes in corpus " + corpus.dir());
}

Result<std::unique_ptr<TextLoader>> MakeTextTrainLoader(std::shared_ptr<const ByteCorpus> corpus, int64_t context,
                                                        SamplerOptions sampling) {
  LS_ASSIGN_OR_RETURN(std::shared_ptr<const DataSource> source, TextTrainSource(std::move(corpus), context));
  sampling.shuffle = true;
  LS_ASSIGN_OR_RETURN(std::unique_ptr<BatchLoader> rows, MakeSourceLoader(std::move(source), sampling));
  return std::unique_ptr<TextLoader>(new TextBatchLoader(std::move(rows)));
}

Result<std::unique_ptr<TextLoader>> MakeTextValLoader(std::shared_ptr<const ByteCorpus> corpus, int64_t context,
                                                      SamplerOptions sampling, int64_t max_batches) {
  LS_RETURN_IF_ERROR(CheckCorpusFitsContext(*corpus, context));
  LS_RETURN_IF_ERROR(CheckValWindows(*corpus, context, sampling));
  LS_ASSIGN_OR_RETURN(std::shared_ptr<const DataSource> source,
                      TextValSource(std::move(corpus), context, max_batches * sampling.global_batch));
  sampling.shuffle = false;
  sampling.final_batch = FinalBatch::kDrop;
  LS_ASSIGN_OR_RETURN(std::unique_ptr<BatchLoader> rows, MakeSourceLoader(std::move(source), sampling));
  return std::unique_ptr<TextLoader>(new TextBatchLoader(std::move(rows)));
}

}  // namespace lockstep::data
