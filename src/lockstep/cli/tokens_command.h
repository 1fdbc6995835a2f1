// `lockstep tokens --from-text DIR_OR_FILE --out FILE`: a text corpus as a byte-level llm.c
// token file (data/text_tokens.h), for data.kind = "tokens".
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "lockstep/core/status.h"

namespace lockstep::cli {

struct TokensArgs {
  std::string from_text;
  std::string out;
};

CLI::App* AddTokensCommand(CLI::App& app, TokensArgs* args);
Status RunTokensCommand(const TokensArgs& args);

}  // namespace lockstep::cli
