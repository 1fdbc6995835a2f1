#include "lockstep/data/image_loaders.h"

#include <algorithm>

namespace lockstep::data {
namespace {

class IdxImageLoader final : public ImageLoader {
 public:
  IdxImageLoader(std::shared_ptr<const IdxDataset> dataset, DistributedSampler sampler)
      : dataset_(std::move(dataset)), sampler_(std::move(sampler)) {}

  Status Next(ImageBatch* batch) override {
    sampler_.Next(&indices_);
    const int64_t b = static_cast<int64_t>(indices_.size());
    const int64_t hw = dataset_->pixels_per_image();
    batch->B = b;
    batch->C = 1;
    batch->H = dataset_->rows();
    batch->W = dataset_->cols();
    batch->valid = 0;
    batch->images.resize(static_cast<size_t>(b * hw));
    batch->labels.resize(static_cast<size_t>(b));
    for (int64_t row = 0; row < b; ++row) {
      const int64_t i = indices_[static_cast<size_t>(row)];
      float* img = batch->images.data() + row * hw;
      if (i < 0) {
        std::fill(img, img + hw, 0.0f);
        batch->labels[static_cast<size_t>(row)] = kIgnoreTarget;
        continue;
      }
      ++batch->valid;
      dataset_->CopyImage(i, img);
      batch->labels[static_cast<size_t>(row)] = dataset_->label(i);
    }
    return Status::Ok();
  }

  LoaderState State() const override { return sampler_.State(); }
  Status Restore(const LoaderState& state) override { return sampler_.Restore(state); }
  int64_t StepsPerEpoch() const override { return sampler_.BatchesPerEpoch(); }

 private:
  std::shared_ptr<const IdxDataset> dataset_;
  DistributedSampler sampler_;
  std::vector<int64_t> indices_;
};

Result<std::unique_ptr<ImageLoader>> Make(std::shared_ptr<const IdxDataset> dataset, SamplerOptions sampling) {
  sampling.dataset_size = dataset->size();
  LS_ASSIGN_OR_RETURN(DistributedSampler sampler, DistributedSampler::Create(sampling));
  return std::unique_ptr<ImageLoader>(new IdxImageLoader(std::move(dataset), std::move(sampler)));
}

}  // namespace

Result<std::unique_ptr<ImageLoader>> MakeImageTrainLoader(std::shared_ptr<const IdxDataset> dataset,
                                                          SamplerOptions sampling) {
  sampling.shuffle = true;
  return Make(std::move(dataset), std::move(sampling));
}

Result<std::unique_ptr<ImageLoader>> MakeImageEvalLoader(std::shared_ptr<const IdxDataset> dataset,
                                                         SamplerOptions sampling) {
  sampling.shuffle = false;
  sampling.final_batch = FinalBatch::kMask;
  return Make(std::move(dataset), std::move(sampling));
}

}  // namespace lockstep::data
