// A Hugging Face tokenizer.json with a byte-level BPE model (GPT-2, Llama 3, SmolLM2, ...), read
// and applied exactly as the `tokenizers` library does: added tokens split out first (leftmost
// longest; lstrip, rstrip, single_word honoured), the pre-tokenizer steps, then BPE merges inside
// each piece (lowest merge rank first, leftmost on ties; `ignore_merges` keeps a piece that is a
// token whole). Encoding adds nothing (no BOS/EOS: the post-processor is not applied).
// What it cannot reproduce exactly it refuses when reading, one line naming the field: another
// model type (WordPiece, Unigram, WordLevel), a normalizer, a pre-tokenizer or decoder kind other
// than ByteLevel / Split / Digits / Sequence, BPE dropout, byte_fallback, subword prefixes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "lockstep/core/result.h"
#include "lockstep/text/pre_tokenizer.h"

namespace lockstep::text {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

class Tokenizer {
 public:
  // Errors are one line naming `path` (InvalidArgument; NotFound for a missing file).
  static Result<Tokenizer> FromFile(const std::string& path);
  static Result<Tokenizer> FromJson(const nlohmann::json& j, const std::string& origin);

  // A tokenizer.json's "pre_tokenizer" value as steps (a Sequence flattened; null: none).
  // InvalidArgument naming `origin` and the kind for what lockstep does not read.
  static Result<std::vector<PreTokenizerStep>> ReadPreTokenizer(const nlohmann::json& j, const std::string& origin);

  // The ids of `text`, which must be valid UTF-8 (else InvalidArgument naming the byte offset).
  Result<std::vector<int32_t>> Encode(std::string_view text) const;
  // The text of `ids` (bytes; invalid UTF-8 sequences become U+FFFD, as transformers decodes);
  // an id outside the vocabulary is InvalidArgument naming it.
  Result<std::string> Decode(std::span<const int32_t> ids) const;

  // One more than the largest id of the model's vocabulary and the added tokens.
  int32_t vocab_size() const { return static_cast<int32_t>(id_to_token_.size()); }
  std::optional<int32_t> TokenToId(std::string_view token) const;
  const std::string& IdToToken(int32_t id) const { return id_to_token_[id]; }
  // The token that ends a document: the first special added token among <|endoftext|>,
  // <|end_of_text|>, </s>, <|im_end|>, <eos>; nullopt when there is none.
  std::optional<int32_t> end_of_text() const { return end_of_text_; }
  const std::vector<AddedToken>& added_tokens() const { return added_; }

  // The first place at or after `from` where `text` may be cut and its two parts encoded apart
  // with the same ids as the whole: NextSafeCut when this tokenizer's pre-tokenizer allows it
  // and no added token holds a newline; text.size() otherwise.
  size_t NextCut(std::string_view text, size_t from) const {
    return cuts_are_safe_ && !added_newline_ ? NextSafeCut(text, from) : text.size();
  }

  // BPE inside one pre-tokenized piece (already in byte-level characters), appending its ids.
  void EncodePiece(std::string_view piece, std::vector<int32_t>* out) const;

  // Encoding with a per-thread cache of pieces already seen (text repeats the same words): the
  // fast path for whole corpora. Not thread-safe; one per thread.
  class Encoder {
   public:
    explicit Encoder(const Tokenizer& t) : t_(t) {}
    Result<std::vector<int32_t>> Encode(std::string_view text);
    Status Append(std::string_view text, std::vector<int32_t>* out);

   private:
    const Tokenizer& t_;
    std::unordered_map<std::string, std::vector<int32_t>> cache_;
  };

 private:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  static uint64_t PairKey(int32_t a, int32_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }

  // The input cut at the added tokens: text (id < 0) and added-token pieces.
  struct Span {
    size_t start, end;
    int32_t id;
  };
  std::vector<Span> SplitAddedTokens(std::string_view text) const;
  void SplitWith(std::string_view text, const std::vector<int>& which, size_t start, size_t end,
                 std::vector<Span>* out) const;
  template <typename PieceFn>
  Status EncodeWith(std::string_view text, std::vector<int32_t>* out, PieceFn&& piece) const;

  std::vector<std::string> id_to_token_;
  std::unordered_map<std::string, int32_t> token_to_id_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::vector<PreTokenizerStep> steps_;
  std::vector<AddedToken> added_;
  std::vector<int> added_unnormalized_, added_normalized_;  // indices into added_
  std::optional<int32_t> unk_;
  std::optional<int32_t> end_of_text_;
  bool ignore_merges_ = false;
  bool cuts_are_safe_ = false;  // encode line by line (pre_tokenizer.h)
  bool added_newline_ = false;  // an added token holds '\n': no cut between blocks
};

}  // namespace lockstep::text
