// SourceLoader: the loader of any DataSource. Each rank reads its slice of every global batch
// the DistributedSampler draws (sample order independent of the world size), into a Batch of
// the source's layout; a masked slot (evaluation's final batch) becomes zero inputs and
// ignored targets (kIgnoreTarget), always in the last rows of a rank's batch.
#pragma once

#include <memory>
#include <vector>

#include "lockstep/core/result.h"
#include "lockstep/data/data_source.h"
#include "lockstep/data/distributed_sampler.h"
#include "lockstep/data/loader.h"

namespace lockstep::data {

// B samples of one layout, row-major: tokens/targets [B, seq], features [B, features],
// labels [B], values [B, values]; vectors of fields the layout lacks stay empty.
struct Batch {
  SampleLayout layout;
  int64_t B = 0;
  int64_t valid = 0;  // real samples: rows [0, valid); the rest are masked
  std::vector<int32_t> tokens, targets, labels;
  std::vector<float> features, values;
};

using BatchLoader = Loader<Batch>;

// `sampling` supplies global batch, world size, rank, seed, shuffle and final-batch policy;
// its dataset_size is set to source->size(). Errors: an empty source or layout, and those of
// DistributedSampler::Create (batch not divisible by the world size, ...).
Result<std::unique_ptr<BatchLoader>> MakeSourceLoader(std::shared_ptr<const DataSource> source,
                                                      SamplerOptions sampling);

}  // namespace lockstep::data
