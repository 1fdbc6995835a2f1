#include "lockstep/data/text_loaders.h"

#include <algorithm>
#include <string>

#include "lockstep/core/rng.h"

namespace lockstep::data {
namespace {

// One loader class for both splits: they differ only in where window k starts.
class WindowLoader final : public TextLoader {
 public:
  WindowLoader(std::shared_ptr<const WindowSource> source, bool train, int64_t context, DistributedSampler sampler)
      : source_(std::move(source)), train_(train), context_(context), sampler_(std::move(sampler)) {}

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
    window_.resize(static_cast<size_t>(t + 1));
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
      source_->Read(offset + k * t, t + 1, window_.data());
      std::copy(window_.begin(), window_.end() - 1, x);
      std::copy(window_.begin() + 1, window_.end(), y);
    }
    return Status::Ok();
  }

  LoaderState State() const override { return sampler_.State(); }
  Status Restore(const LoaderState& state) override { return sampler_.Restore(state); }
  int64_t StepsPerEpoch() const override { return sampler_.BatchesPerEpoch(); }

 private:
  std::shared_ptr<const WindowSource> source_;
  bool train_;
  int64_t context_;
  DistributedSampler sampler_;
  std::vector<int64_t> indices_;
  std::vector<int32_t> window_;
};

// A split of a byte corpus as a window source that keeps the corpus alive.
class CorpusSplit final : public WindowSource {
 public:
  CorpusSplit(std::shared_ptr<const ByteCorpus> corpus, bool train)
      : corpus_(std::move(corpus)), bytes_(train ? corpus_->train() : corpus_->val(), corpus_->dir()) {}
  int64_t size() const override { return bytes_.size(); }
  void Read(int64_t begin, int64_t n, int32_t* out) const override { bytes_.Read(begin, n, out); }
  const std::string& name() const override { return bytes_.name(); }

 private:
  std::shared_ptr<const ByteCorpus> corpus_;
  ByteWindowSource bytes_;
};

}  // namespace

int64_t TrainWindowsPerEpoch(int64_t train_len, int64_t context) { return train_len / context - 1; }

int64_t TrainWindowOffset(uint64_t seed, int64_t epoch, int64_t context) {
  Rng rng(seed, kWindowOffsetStream + static_cast<uint64_t>(epoch));
  return static_cast<int64_t>(rng.Below(static_cast<uint64_t>(context)));
}

int64_t ValWindowCount(int64_t val_len, int64_t context) { return (val_len - 1) / context; }

Result<std::unique_ptr<TextLoader>> MakeWindowTrainLoader(std::shared_ptr<const WindowSource> train, int64_t context,
                                                          SamplerOptions sampling) {
  sampling.dataset_size = TrainWindowsPerEpoch(train->size(), context);
  sampling.shuffle = true;
  LS_ASSIGN_OR_RETURN(DistributedSampler sampler, DistributedSampler::Create(sampling));
  return std::unique_ptr<TextLoader>(new WindowLoader(std::move(train), true, context, std::move(sampler)));
}

Result<std::unique_ptr<TextLoader>> MakeWindowValLoader(std::shared_ptr<const WindowSource> val, int64_t context,
                                                        SamplerOptions sampling, int64_t max_batches,
                                                        const char* unit) {
  int64_t windows = ValWindowCount(val->size(), context);
  if (windows < sampling.global_batch) {
    return Status::InvalidArgument(sampling.batch_key + " " + std::to_string(sampling.global_batch) +
                                   " is larger than the " + std::to_string(windows) + " validation windows of " +
                                   std::to_string(context) + " " + unit + " " + val->name());
  }
  if (max_batches > 0) windows = std::min(windows, max_batches * sampling.global_batch);
  sampling.dataset_size = windows;
  sampling.shuffle = false;
  sampling.final_batch = FinalBatch::kDrop;
  LS_ASSIGN_OR_RETURN(DistributedSampler sampler, DistributedSampler::Create(sampling));
  return std::unique_ptr<TextLoader>(new WindowLoader(std::move(val), false, context, std::move(sampler)));
}

Result<std::unique_ptr<TextLoader>> MakeTextTrainLoader(std::shared_ptr<const ByteCorpus> corpus, int64_t context,
                                                        SamplerOptions sampling) {
  LS_RETURN_IF_ERROR(CheckCorpusFitsContext(*corpus, context));
  return MakeWindowTrainLoader(std::make_shared<CorpusSplit>(std::move(corpus), true), context, std::move(sampling));
}

Result<std::unique_ptr<TextLoader>> MakeTextValLoader(std::shared_ptr<const ByteCorpus> corpus, int64_t context,
                                                      SamplerOptions sampling, int64_t max_batches) {
  LS_RETURN_IF_ERROR(CheckCorpusFitsContext(*corpus, context));
  return MakeWindowValLoader(std::make_shared<CorpusSplit>(std::move(corpus), false), context, std::move(sampling),
                             max_batches, "bytes in corpus");
}

}  // namespace lockstep::data
