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
#include "lockstep/data/data_source.h"
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

// The two splits as DataSources of layout {seq = context, vocab = 256} (the loaders below and the trainer
// read them the same way). Training sample k of epoch e is the window at
// TrainWindowOffset(seed, e) + k*T; validation sample k the window at k*T, of at most
// `max_windows` (0: all). Errors: corpus too small for `context`.
Result<std::shared_ptr<const DataSource>> TextTrainSource(std::shared_ptr<const ByteCorpus> corpus, int64_t context);
Result<std::shared_ptr<const DataSource>> TextValSource(std::shared_ptr<const ByteCorpus> corpus, int64_t context,
                                                        int64_t max_windows);
// The validation split must hold at least one global batch of `sampling.global_batch`
// windows (InvalidArgument naming sampling.batch_key otherwise).
Status CheckValWindows(const ByteCorpus& corpus, int64_t context, const SamplerOptions& sampling);

// `sampling` supplies global batch, world size, rank, seed and final-batch policy; its
// dataset_size and shuffle are set here. Errors: corpus too small for `context`, and those of
// DistributedSampler::Create (batch not divisible by the world size, ...).
Result<std::unique_ptr<TextLoader>> MakeTextTrainLoader(std::shared_ptr<const ByteCorpus> corpus, int64_t context,
                                                        SamplerOptions sampling);
Result<std::unique_ptr<TextLoader>> MakeTextValLoader(std::shared_ptr<const ByteCorpus> corpus, int64_t context,
                                                      SamplerOptions sampling, int64_t max_batches);

// The same windows over any WindowSource (a token corpus's streams): the text loaders and
// sources above are these over a byte corpus's splits. Layout {seq = context, vocab}: ids at
// or above `vocab` stop the run with a message naming the sample (token files hold uint16
// ids, hence the default). The source must hold at least 2*context (train) / context + 1
// (validation) ids; `unit` words the validation error ("tokens in").
inline constexpr int64_t kTokenFileVocab = 65536;
std::shared_ptr<const DataSource> WindowTrainSource(std::shared_ptr<const WindowSource> train, int64_t context,
                                                    int64_t vocab);
std::shared_ptr<const DataSource> WindowValSource(std::shared_ptr<const WindowSource> val, int64_t context,
                                                  int64_t vocab, int64_t max_windows);
Status CheckWindowValWindows(const WindowSource& val, int64_t context, const SamplerOptions& sampling,
                             const char* unit = "tokens in");
Result<std::unique_ptr<TextLoader>> MakeWindowTrainLoader(std::shared_ptr<const WindowSource> train, int64_t context,
                                                          SamplerOptions sampling, int64_t vocab = kTokenFileVocab);
Result<std::unique_ptr<TextLoader>> MakeWindowValLoader(std::shared_ptr<const WindowSource> val, int64_t context,
                                                        SamplerOptions sampling, int64_t max_batches,
                                                        const char* unit = "tokens in",
                                                        int64_t vocab = kTokenFileVocab);

}  // namespace lockstep::data
