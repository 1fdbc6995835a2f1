// TokenCorpus: the training and validation token streams of data.kind = "tokens"
// (docs/data.md). data.train and data.val each name a file or a glob; several files are one
// stream in name order. Without data.val the last 10% of the training stream is validation,
// split as the byte corpus is (floor(0.9 * tokens)), so a text corpus and its token file
// (`lockstep tokens --from-text`) give the very same windows.
//
// Loading maps every file (nothing is read into memory) and checks, each failure one line
// naming the file: framing (TokenFile::Open), a token id >= the model's vocabulary (one
// sequential pass over the data, page by page), a split too small for the context.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lockstep/core/result.h"
#include "lockstep/data/token_file.h"
#include "lockstep/data/window_source.h"

namespace lockstep::data {

struct TokenCorpusOptions {
  std::string train;  // path or glob (data.train), required
  std::string val;    // path or glob (data.val); empty: the last 10% of train
  TokenFormat format = TokenFormat::kAuto;
  int64_t vocab = 0;    // every id must be below it (model.vocab)
  int64_t context = 0;  // model.context: windows of context + 1 ids
  // data.loss_mask: every token file F has its loss mask F.mask beside it (same token count);
  // targets the mask marks 0 are left out of the loss.
  bool loss_mask = false;
};

// The files a path or glob names, sorted by name (byte order). `key` names the config key in
// errors; no match is NotFound.
Result<std::vector<std::string>> ExpandTokenPaths(const std::string& pattern, const std::string& key);

class TokenCorpus {
 public:
  static Result<TokenCorpus> Load(const TokenCorpusOptions& options);

  std::shared_ptr<const TokenStream> train() const { return train_; }
  std::shared_ptr<const TokenStream> val() const { return val_; }

 private:
  std::shared_ptr<const TokenStream> train_, val_;
};

}  // namespace lockstep::data
