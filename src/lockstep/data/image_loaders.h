// Loaders of image batches from an IdxDataset (cnn-fashion).
//
// Training: every epoch a DistributedSampler permutation of all images; the partial final
// batch is dropped or padded (data.final_batch). Evaluation: all images in file order, each
// exactly once; the final partial batch is filled with masked slots (label kIgnoreTarget,
// zero pixels), which are always the last rows of a rank's batch — rows [valid, B) — so the
// trainer can evaluate only the first `valid` rows and still make the same collective calls
// on every rank. Accuracy summed over ranks is then exact for any world size.
#pragma once

#include <memory>

#include "lockstep/core/result.h"
#include "lockstep/data/data_source.h"
#include "lockstep/data/distributed_sampler.h"
#include "lockstep/data/idx_dataset.h"
#include "lockstep/data/loader.h"

namespace lockstep::data {

// The images as a DataSource of layout {features = rows*cols (byte / 255), classes}.
std::shared_ptr<const DataSource> ImageSource(std::shared_ptr<const IdxDataset> dataset);

// `sampling`: global batch, world size, rank, seed, final-batch policy; dataset_size and
// shuffle are set here.
Result<std::unique_ptr<ImageLoader>> MakeImageTrainLoader(std::shared_ptr<const IdxDataset> dataset,
                                                          SamplerOptions sampling);
Result<std::unique_ptr<ImageLoader>> MakeImageEvalLoader(std::shared_ptr<const IdxDataset> dataset,
                                                         SamplerOptions sampling);

}  // namespace lockstep::data
