// `lockstep tokens`: text as an llm.c token file for data.kind = "tokens".
//   --from-text DIR_OR_FILE --out FILE                 byte-level (data/text_tokens.h)
//   --tokenizer T.json --from-text PATH... --out FILE  a BPE tokenizer: each file a document
//   --tokenizer T.json --from-jsonl F --text-key K     each line's K a document
//   --tokenizer T.json --from-jsonl F --prompt-key P --response-key R
//                                   each line's P then R a document, and FILE.mask beside FILE:
//                                   1 for the response's tokens and the end-of-text, 0 for the
//                                   prompt's (data.loss_mask = true trains on the 1s only)
// Documents are each followed by the tokenizer's end-of-text token (when it has one). uint16
// tokens while the vocabulary fits, else llm.c's uint32 variant. Streamed in blocks and encoded
// on several threads: inputs larger than memory go through.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "lockstep/core/status.h"

namespace lockstep::cli {

struct TokensArgs {
  std::vector<std::string> from_text;
  std::string from_jsonl;
  std::string text_key;
  std::string prompt_key, response_key;
  std::string tokenizer;
  int threads = 0;
  std::string out;
};

CLI::App* AddTokensCommand(CLI::App& app, TokensArgs* args);
Status RunTokensCommand(const TokensArgs& args);

}  // namespace lockstep::cli
