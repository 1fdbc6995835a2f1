// Reads the data-related keys of a run's config and turns them into sampler options.
//
// Keys (all optional):
//   data.dir          corpus directory (text) or IDX directory (images); defaults are the
//                     Debian package locations of DESIGN.md
//   data.train        tokens: the training token file(s), a path or glob (required)
//   data.val          tokens: the validation token file(s); default the last 10% of data.train
//   data.format       tokens: "auto" (default), "llmc" or "raw" (token_file.h)
//   data.final_batch  "drop" (default) | "pad": the final partial training batch of an epoch
//   eval.batch_size   global evaluation batch; default train.batch_size
//   eval.batches      cap on evaluation batches (text); 0 (default) = the whole split
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "lockstep/core/config.h"
#include "lockstep/data/distributed_sampler.h"
#include "lockstep/data/token_file.h"

namespace lockstep::data {

// kCustom: a program's own data source (api/): data.dir is not read for it.
enum class DatasetKind { kText, kFashionMnist, kTokens, kCustom };

struct DataConfig {
  DatasetKind kind = DatasetKind::kText;
  std::string dir;
  std::string train, val;  // tokens: paths or globs
  TokenFormat format = TokenFormat::kAuto;
  FinalBatch final_batch = FinalBatch::kDrop;
  int64_t eval_batch_size = 0;
  int64_t eval_batches = 0;
  // data.tokenizer: the tokenizer.json the token files were made with (tokens only). Read and
  // checked at start; the run keeps it in every checkpoint (manifest extra "tokenizer"), so
  // that `sample --prompt` and `export --format hf` need nothing else.
  bool loss_mask = false;  // data.loss_mask (tokens): train on the targets each file's .mask marks
  std::string tokenizer_path;
  std::shared_ptr<const nlohmann::json> tokenizer;
  int64_t tokenizer_vocab = 0;
};

Result<DataConfig> ReadDataConfig(const Config& config, DatasetKind kind, int64_t train_batch_size);

// The seed data shuffles use, derived from train.seed so they are not the same random
// numbers as the model's initialization drawn under train.seed itself.
uint64_t DataSeed(uint64_t train_seed);

// Sampler options of this rank for training and for evaluation.
SamplerOptions TrainSampling(const DataConfig& data, int64_t global_batch, int64_t world_size, int64_t rank,
                             uint64_t train_seed);
SamplerOptions EvalSampling(const DataConfig& data, int64_t world_size, int64_t rank);

}  // namespace lockstep::data
