// `lockstep tokenizer train|encode|decode`: byte-level BPE tokenizers (Hugging Face's
// tokenizer.json) without Python. train: text files in, a tokenizer.json out; encode: the ids of
// a text, space separated, nothing added; decode: the text of ids.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "lockstep/core/status.h"

namespace lockstep::cli {

struct TokenizerArgs {
  CLI::App* train = nullptr;
  CLI::App* encode = nullptr;
  CLI::App* decode = nullptr;
  // train
  std::vector<std::string> from_text;
  int vocab_size = 0;
  std::string pre_tokenizer = "gpt2";
  std::vector<std::string> special;
  int64_t min_frequency = 0;
  int threads = 0;
  std::string out;
  // encode / decode
  std::string tokenizer;
  std::string input = "-";
};

CLI::App* AddTokenizerCommand(CLI::App& app, TokenizerArgs* args);
Status RunTokenizerCommand(const TokenizerArgs& args);

}  // namespace lockstep::cli
