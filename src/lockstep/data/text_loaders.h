// Loaders of windows of token ids: bytes of a ByteCorpus (gpt-tiny) or any WindowSource
// (token files, data.kind = "tokens").
//
// Training windows — a shuffled stride grid, so every epoch covers the whole split once:
//   K = floor(len / T) - 1 windows per epoch (len = training split size), window k of epoch e
//   starts at o_e + k*T, where o_e in [0, T) is drawn from Rng(seed, kWindowOffsetStream + e).
//   The largest start is T-1 + (K-1)*T <= len - T - 1, so every window's T+1 bytes exist.
//   Consecutive windows tile the split; the random offset shifts the tiling each epoch so no
//   byte is always at the same position in its window (always first, never predicted).
//   The order of the K windows is the epoch's DistributedSampler permutation.
//   (Unlike the PyTorch peer, which draws starts uniformly with replacement, an epoch here is
//   a real pass over the data, and the stream is reproducible from LoaderState alone.)
// Validation windows — fixed: non-overlapping windows from the start of the validation
//   split, start k*T for k < floor((len_val - 1) / T), capped at max_batches global batches
//   (0 = all), in order; a final partial batch is dropped so the model's loss never sees
//   padding. The set does not depend on the seed or the world size.
#pragma once

#include <memory>

#include "lockstep/core/result.h"
#include "lockstep/data/byte_corpus.h"
#include "lockstep/data/distributed_sampler.h"
#include "lockstep/data/loader.h"
#include "lockstep/data/window_source.h"

namespace lockstep::data {

// RNG stream of the per-epoch window offsets: far above any epoch number, so it never meets
// the sampler's permutation streams (stream = epoch) under the same seed.
inline constexpr uint64_t kWindowOffsetStream = uint64_t{1} << 62;

int64_t TrainWindowsPerEpoch(int64_t train_len, int64_t context);
int64_t TrainWindowOffset(uint64_t seed, int64_t epoch, int64_t context);
int64_t ValWindowCount(int64_t val_len, int64_t context);

// `sampling` supplies global batch, world size, rank, seed and final-batch policy; its
// dataset_size and shuffle are set here. Errors: corpus too small for `context`, and those of
// DistributedSampler::Create (batch not divisible by the world size, ...).
Result<std::unique_ptr<TextLoader>> MakeTextTrainLoader(std::shared_ptr<const ByteCorpus> corpus, int64_t context,
                                                        SamplerOptions sampling);
Result<std::unique_ptr<TextLoader>> MakeTextValLoader(std::shared_ptr<const ByteCorpus> corpus, int64_t context,
                                                      SamplerOptions sampling, int64_t max_batches);

// The same windows over any WindowSource (a token corpus's streams): the text loaders above
// are these over a byte corpus's splits. The source must hold at least 2*context (train) /
// context + 1 (validation) ids; `unit` words the validation error ("tokens in").
Result<std::unique_ptr<TextLoader>> MakeWindowTrainLoader(std::shared_ptr<const WindowSource> train, int64_t context,
                                                          SamplerOptions sampling);
Result<std::unique_ptr<TextLoader>> MakeWindowValLoader(std::shared_ptr<const WindowSource> val, int64_t context,
                                                        SamplerOptions sampling, int64_t max_batches,
                                                        const char* unit = "tokens in");

}  // namespace lockstep::data
