#include "lockstep/data/text_tokens.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "lockstep/data/byte_corpus.h"
#include "lockstep/data/token_file.h"

namespace lockstep::data {

Result<TextTokensSummary> WriteTextAsTokens(const std::string& from, const std::string& out) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(from, ec);
  if (ec || !std::filesystem::exists(st)) return Status::NotFound("--from-text: " + from + " does not exist");
  std::vector<uint8_t> bytes;
  TextTokensSummary summary;
  if (std::filesystem::is_directory(st)) {
    // The text loader's own selection and order, so both read the same bytes.
    LS_ASSIGN_OR_RETURN(ByteCorpus corpus, ByteCorpus::Load(from, 1));
    bytes.assign(corpus.bytes().begin(), corpus.bytes().end());
    summary.files = static_cast<int64_t>(corpus.files().size());
  } else {
    if (!std::filesystem::is_regular_file(st))
      return Status::InvalidArgument("--from-text: " + from + " is neither a directory nor a regular file");
    std::ifstream in(from, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) return Status::InvalidArgument("--from-text: cannot read " + from);
    summary.files = 1;
  }
  if (bytes.empty()) return Status::InvalidArgument("--from-text: " + from + " holds no bytes");
  std::vector<uint16_t> tokens(bytes.begin(), bytes.end());
  LS_RETURN_IF_ERROR(WriteLlmcTokenFile(out, tokens));
  summary.tokens = static_cast<int64_t>(tokens.size());
  return summary;
}

}  // namespace lockstep::data
