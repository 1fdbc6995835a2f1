#include "lockstep/data/image_loaders.h"

#include "lockstep/data/source_loader.h"

namespace lockstep::data {
namespace {

class IdxImageSource final : public DataSource {
 public:
  explicit IdxImageSource(std::shared_ptr<const IdxDataset> dataset) : dataset_(std::move(dataset)) {}

  int64_t size() const override { return dataset_->size(); }
  SampleLayout layout() const override {
    return {.features = dataset_->pixels_per_image(), .classes = dataset_->num_classes()};
  }
  Status Read(const SampleKey& key, const SampleSlot& out) const override {
    dataset_->CopyImage(key.index, out.features);
    *out.label = dataset_->label(key.index);
    return Status::Ok();
  }

 private:
  std::shared_ptr<const IdxDataset> dataset_;
};

// The image batches of a source loader (the same rows, under the image batch's names).
class ImageBatchLoader final : public ImageLoader {
 public:
  ImageBatchLoader(std::unique_ptr<BatchLoader> inner, int64_t rows, int64_t cols)
      : inner_(std::move(inner)), rows_(rows), cols_(cols) {}

  Status Next(ImageBatch* batch) override {
    LS_RETURN_IF_ERROR(inner_->Next(&batch_));
    batch->images.swap(batch_.features);
    batch->labels.swap(batch_.labels);
    batch->B = batch_.B;
    batch->C = 1;
    batch->H = rows_;
    batch->W = cols_;
    batch->valid = batch_.valid;
    return Status::Ok();
  }
  LoaderState State() const override { return inner_->State(); }
  Status Restore(const LoaderState& state) override { return inner_->Restore(state); }
  int64_t StepsPerEpoch() const override { return inner_->StepsPerEpoch(); }

 private:
  std::unique_ptr<BatchLoader> inner_;
  int64_t rows_, cols_;
  Batch batch_;
};

Result<std::unique_ptr<ImageLoader>> Make(std::shared_ptr<const IdxDataset> dataset, SamplerOptions sampling) {
  const int64_t rows = dataset->rows(), cols = dataset->cols();
  LS_ASSIGN_OR_RETURN(std::unique_ptr<BatchLoader> inner, MakeSourceLoader(ImageSource(std::move(dataset)), sampling));
  return std::unique_ptr<ImageLoader>(new ImageBatchLoader(std::move(inner), rows, cols));
}

}  // namespace

std::shared_ptr<const DataSource> ImageSource(std::shared_ptr<const IdxDataset> dataset) {
  return std::make_shared<IdxImageSource>(std::move(dataset));
}

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
