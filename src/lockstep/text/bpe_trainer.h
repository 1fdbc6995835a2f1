// A byte-level BPE trainer (`lockstep tokenizer train`), the algorithm of Hugging Face's
// BpeTrainer: count the pre-tokenized words of the text; the vocabulary starts with the special
// tokens, then all 256 byte characters in code point order; then, until the vocabulary is full,
// the most frequent adjacent pair of tokens (counted over all words, ties to the pair of
// smaller ids) becomes a new token and a merge. Its output is a tokenizer.json that
// transformers' PreTrainedTokenizerFast and lockstep's Tokenizer load.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/core/result.h"

namespace lockstep::text {

enum class PreTokenizerKind { kGpt2, kLlama3 };

struct BpeTrainerOptions {
  int32_t vocab_size = 0;
  PreTokenizerKind pre_tokenizer = PreTokenizerKind::kGpt2;
  std::vector<std::string> special_tokens;  // ids 0, 1, ... in this order
  int64_t min_frequency = 0;                // a pair seen fewer times is never merged
  int threads = 1;                          // word counting in parallel
};

struct TrainedBpe {
  nlohmann::json tokenizer;  // the tokenizer.json
  int64_t merges = 0;
  // The text's length in tokens once the merges are applied, counted from the trainer's own
  // words: encoding the same text with `tokenizer` must give as many ids.
  int64_t tokens = 0;
};

class BpeTrainer {
 public:
  explicit BpeTrainer(BpeTrainerOptions options);
  // InvalidArgument when vocab_size is below the special tokens plus the 256 byte characters,
  // or a special token is given twice (Train() says the same; this is for checking first).
  Status CheckOptions() const;
  // Counts the words of one text (valid UTF-8, else InvalidArgument naming `what` and the
  // byte offset, counted from `base`). Call per block of whole lines; the counts add up.
  Status AddText(std::string_view text, const std::string& what, int64_t base = 0);
  // Learns the merges (CheckOptions() first).
  Result<TrainedBpe> Train() const;

  int64_t words_seen() const { return words_seen_; }
  int64_t distinct_words() const { return static_cast<int64_t>(counts_.size()); }

 private:
  BpeTrainerOptions options_;
  std::unordered_map<std::string, int64_t> counts_;
  int64_t words_seen_ = 0;
};

// The pre_tokenizer JSON a trained tokenizer gets for `kind` (as GPT-2's and Llama 3's own
// tokenizer.json spell it).
nlohmann::json PreTokenizerJson(PreTokenizerKind kind);

}  // namespace lockstep::text
