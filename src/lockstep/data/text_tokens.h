// Byte-level tokenization of a text corpus into an llm.c token file (`lockstep tokens
// --from-text`): token id = byte value (vocabulary 256), so a model trained on the file with
// data.kind = "tokens" sees exactly the ids it would see with data.kind = "text".
#pragma once

#include <cstdint>
#include <string>

#include "lockstep/core/result.h"

namespace lockstep::data {

struct TextTokensSummary {
  int64_t files = 0;   // text files read
  int64_t tokens = 0;  // = bytes
};

// `from`: a directory (the files ByteCorpus would read, in its order) or one regular file.
Result<TextTokensSummary> WriteTextAsTokens(const std::string& from, const std::string& out);

}  // namespace lockstep::data
