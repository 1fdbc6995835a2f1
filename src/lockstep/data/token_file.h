// TokenFile: one memory-mapped file of uint16 token ids, in either format people already have
// (docs/data.md):
//   llm.c   a header of 256 little-endian int32 (magic 20240520, version 1, token count N,
//           the rest unused), then N little-endian uint16 tokens: 1024 + 2N bytes exactly;
//   raw     nanoGPT's train.bin / val.bin: little-endian uint16 tokens and nothing else.
// The file is mapped read-only, never read into memory as a whole: pages come in as windows
// touch them and Release() hands them back, so a corpus larger than RAM costs address space,
// not resident memory. Move-only; the mapping lives as long as the object.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "lockstep/core/result.h"

namespace lockstep::data {

inline constexpr int32_t kLlmcTokensMagic = 20240520;
inline constexpr int32_t kLlmcTokensVersion = 1;
inline constexpr int64_t kLlmcHeaderInts = 256;
inline constexpr int64_t kLlmcHeaderBytes = kLlmcHeaderInts * 4;
// llm.c's model checkpoint (a different file kind), named in the error when given as data.
inline constexpr int32_t kLlmcModelMagic = 20240326;

// auto: an llm.c header when the file starts with its magic, raw otherwise.
enum class TokenFormat { kAuto, kLlmc, kRaw };
// "auto" | "llmc" | "raw" (the values of data.format).
Result<TokenFormat> ParseTokenFormat(const std::string& text);

class TokenFile {
 public:
  // Maps `path` and checks its framing (not the token values: see MaxToken). Errors are one
  // line naming the path: missing (NotFound), empty, truncated, bad magic or version, a
  // header count that disagrees with the size (InvalidArgument).
  static Result<TokenFile> Open(const std::string& path, TokenFormat format);

  TokenFile(TokenFile&& other) noexcept;
  TokenFile& operator=(TokenFile&& other) noexcept;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  ~TokenFile();

  std::span<const uint16_t> tokens() const { return {tokens_, static_cast<size_t>(count_)}; }
  int64_t size() const { return count_; }
  const std::string& path() const { return path_; }
  TokenFormat format() const { return format_; }  // kLlmc or kRaw

  // The largest token id and the index of its first occurrence, reading the file once in
  // chunks and releasing each chunk's pages after it (a scan of a huge file keeps RSS flat).
  struct MaxTokenAt {
    uint16_t value = 0;
    int64_t index = 0;
  };
  MaxTokenAt MaxToken() const;

  // Drops this process's mapping of the pages holding tokens [begin, end) (they stay in the
  // page cache): memory-mapped reads then never accumulate resident memory.
  void Release(int64_t begin, int64_t end) const;

 private:
  TokenFile() = default;
  void Unmap();

  std::string path_;
  TokenFormat format_ = TokenFormat::kRaw;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const uint16_t* tokens_ = nullptr;
  int64_t count_ = 0;
};

// Writes `tokens` as an llm.c token file (header + uint16), through a temporary file renamed
// into place.
Status WriteLlmcTokenFile(const std::string& path, std::span<const uint16_t> tokens);

}  // namespace lockstep::data
