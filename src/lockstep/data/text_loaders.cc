#include "lockstep/data/text_loaders.h"

#include <algorithm>
#include <string>

#include "lockstep/core/rng.h"

namespace lockstep::data {
namespace {

// One loader class for both splits: they differ only in where window k starts.
class CorpusWindowLoader final : public TextLoader {
 public:
  CorpusWindowLoader(std::shared_ptr<const ByteCorpus> corpus, bool train, int64_t context, DistributedSampler sampler)
      : corpus_(std::move(corpus)),
        source_(train ? corpus_->train() : corpus_->val()),
        train_(train),
        context_(context),
        sampler_(std::move(sampler)) {}

  Status Next(TextBatch* batch) override {
    const int64_t epoch = sampler_.State().epoch;
    const int64_t offset = train_ ? TrainWindowOffset(sampler_.State().seed, epoch, context_) : 0;
    sampler_.Next(&indices_);
    const int64_t b = static_cast<int64_t>(indices_.size()), t = context_;
    batch->B = b;
    batch->T = t;
    batch->valid = 0;
    batch->x.resize(static_cast<size_t>(b * t));
    batch->y.resize(static_cast<size_t>(b * t));
    for (int64_t row = 0; row < b; ++row) {
      int32_t* x = batch->x.data() + row * t;
      int32_t* y = batch->y.data() + row * t;
      const int64_t k = indices_[static_cast<size_t>(row)];
      if (k < 0) {  // masked slot (not produced with the policies used here, kept for safety)
        std::fill(x, x + t, 0);
        std::fill(y, y + t, kIgnoreTarget);
        continue;
      }
      ++batch->valid;
      const uint8_t* w = source_.data() + offset + k * t;
      for (int64_t i = 0; i < t; ++i) {
        x[i] = w[i];
        y[i] = w[i + 1];
      }
    }
    return Status::Ok();
  }

  LoaderState State() const override { return sampler_.State(); }
  Status Restore(const LoaderState& state) override { return sampler_.Restore(state); }
  int64_t StepsPerEpoch() const override { return sampler_.BatchesPerEpoch(); }

 private:
  std::shared_ptr<const ByteCorpus> corpus_;  // keeps source_ alive
  std::span<const uint8_t> source_;
  bool train_;
  int64_t context_;
  DistributedSampler sampler_;
  std::vector<int64_t> indices_;
};

}  // namespace

int64_t TrainWindowsPerEpoch(int64_t train_len, int64_t context) { return train_len / context - 1; }

int64_t TrainWindowOffset(uint64_t seed, int64_t epoch, int64_t context) {
  Rng rng(seed, kWindowOffsetStream + static_cast<uint64_t>(epoch));
  return static_cast<int64_t>(rng.Below(static_cast<uint64_t>(context)));
}

int64_t ValWindowCount(int64_t val_len, int64_t context) { return (val_len - 1) / context; }

Result<std::unique_ptr<TextLoader>> MakeTextTrainLoader(std::shared_ptr<const ByteCorpus> corpus, int64_t context,
                                                        SamplerOptions sampling) {
  LS_RETURN_IF_ERROR(CheckCorpusFitsContext(*corpus, context));
  sampling.dataset_size = TrainWindowsPerEpoch(static_cast<int64_t>(corpus->train().size()), context);
  sampling.shuffle = true;
  LS_ASSIGN_OR_RETURN(DistributedSampler sampler, DistributedSampler::Create(sampling));
  return std::unique_ptr<TextLoader>(new CorpusWindowLoader(std::move(corpus), true, context, std::move(sampler)));
}

Result<std::unique_ptr<TextLoader>> MakeTextValLoader(std::shared_ptr<const ByteCorpus> corpus, int64_t context,
                                                      SamplerOptions sampling, int64_t max_batches) {
  LS_RETURN_IF_ERROR(CheckCorpusFitsContext(*corpus, context));
  int64_t windows = ValWindowCount(static_cast<int64_t>(corpus->val().size()), context);
  if (windows < sampling.global_batch) {
    return Status::InvalidArgument(sampling.batch_key + " " + std::to_string(sampling.global_batch) +
                                   " is larger than the " + std::to_string(windows) + " validation windows of " +
                                   std::to_string(context) + " bytes in corpus " + corpus->dir());
  }
  if (max_batches > 0) windows = std::min(windows, max_batches * sampling.global_batch);
  sampling.dataset_size = windows;
  sampling.shuffle = false;
  sampling.final_batch = FinalBatch::kDrop;
  LS_ASSIGN_OR_RETURN(DistributedSampler sampler, DistributedSampler::Create(sampling));
  return std::unique_ptr<TextLoader>(new CorpusWindowLoader(std::move(corpus), false, context, std::move(sampler)));
}

}  // namespace lockstep::data
