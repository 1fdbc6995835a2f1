#include "lockstep/data/data_config.h"

#include "lockstep/data/byte_corpus.h"
#include "lockstep/data/idx_dataset.h"
#include "lockstep/text/tokenizer.h"

#include <fstream>

namespace lockstep::data {

Result<DataConfig> ReadDataConfig(const Config& config, DatasetKind kind, int64_t train_batch_size) {
  DataConfig d;
  d.kind = kind;
  if (kind == DatasetKind::kTokens) {
    LS_ASSIGN_OR_RETURN(d.train, config.GetString("data.train", ""));
    if (d.train.empty())
      return Status::InvalidArgument("data.train: required with data.kind = \"tokens\" (a token file path or glob)");
    LS_ASSIGN_OR_RETURN(d.val, config.GetString("data.val", ""));
    LS_ASSIGN_OR_RETURN(std::string format, config.GetString("data.format", "auto"));
    LS_ASSIGN_OR_RETURN(d.format, ParseTokenFormat(format));
  } else if (kind != DatasetKind::kCustom) {
    const char* default_dir = kind == DatasetKind::kText ? kDefaultCorpusDir : kDefaultFashionMnistDir;
    LS_ASSIGN_OR_RETURN(d.dir, config.GetString("data.dir", default_dir));
  }
  // Token files (or a program's own data, which may be tokens too) name their tokenizer.
  if (kind == DatasetKind::kTokens || kind == DatasetKind::kCustom) {
    LS_ASSIGN_OR_RETURN(d.loss_mask, config.GetBool("data.loss_mask", false));
    LS_ASSIGN_OR_RETURN(d.tokenizer_path, config.GetString("data.tokenizer", ""));
    if (!d.tokenizer_path.empty()) {
      std::ifstream in(d.tokenizer_path, std::ios::binary);
      if (!in) return Status::InvalidArgument("data.tokenizer: cannot open " + d.tokenizer_path);
      auto j = std::make_shared<nlohmann::json>(nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false));
      if (j->is_discarded()) return Status::InvalidArgument("data.tokenizer: " + d.tokenizer_path + " is not valid JSON");
      auto t = text::Tokenizer::FromJson(*j, "data.tokenizer " + d.tokenizer_path);
      if (!t.ok()) return t.status();
      d.tokenizer_vocab = t->vocab_size();
      d.tokenizer = std::move(j);
    }
  }
  LS_ASSIGN_OR_RETURN(std::string final_batch, config.GetString("data.final_batch", "drop"));
  LS_ASSIGN_OR_RETURN(d.final_batch, ParseFinalBatch(final_batch, "data.final_batch"));
  LS_ASSIGN_OR_RETURN(d.eval_batch_size, config.GetInt("eval.batch_size", train_batch_size));
  if (d.eval_batch_size < 1) {
    return Status::InvalidArgument("eval.batch_size: expected an integer >= 1, got " +
                                   std::to_string(d.eval_batch_size));
  }
  LS_ASSIGN_OR_RETURN(d.eval_batches, config.GetInt("eval.batches", 0));
  if (d.eval_batches < 0) {
    return Status::InvalidArgument("eval.batches: expected an integer >= 0 (0 = all), got " +
                                   std::to_string(d.eval_batches));
  }
  return d;
}

uint64_t DataSeed(uint64_t train_seed) {
  // splitmix64 finalizer of seed + a fixed tag: a bijection, so distinct run seeds keep
  // distinct data orders.
  uint64_t z = train_seed + 0x6c6f636b73746570ull;  // "lockstep"
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

SamplerOptions TrainSampling(const DataConfig& data, int64_t global_batch, int64_t world_size, int64_t rank,
                             uint64_t train_seed) {
  SamplerOptions s;
  s.global_batch = global_batch;
  s.world_size = world_size;
  s.rank = rank;
  s.seed = DataSeed(train_seed);
  s.final_batch = data.final_batch;
  s.batch_key = "train.batch_size";
  return s;
}

SamplerOptions EvalSampling(const DataConfig& data, int64_t world_size, int64_t rank) {
  SamplerOptions s;
  s.global_batch = data.eval_batch_size;
  s.world_size = world_size;
  s.rank = rank;
  s.shuffle = false;
  s.batch_key = "eval.batch_size";
  return s;
}

}  // namespace lockstep::data
