// TokenFile: one memory-mapped file of token ids, in the formats people already have
// (docs/data.md):
//   llm.c   a header of 256 little-endian int32 (magic 20240520, version 1, token count N,
//           the rest unused), then N little-endian uint16 tokens: 1024 + 2N bytes exactly;
//           or llm.c's Llama 3 variant for vocabularies past 65,536 (magic 20240801, version
//           7), whose N tokens are little-endian uint32: 1024 + 4N bytes;
//   raw     nanoGPT's train.bin / val.bin: little-endian uint16 tokens and nothing else.
// The file is mapped read-only, never read into memory as a whole: pages come in as windows
// touch them and Release() hands them back, so a corpus larger than RAM costs address space,
// not resident memory. Move-only; the mapping lives as long as the object.
#pragma once

#include <cstdint>
#include <span>
#include <cstdio>
#include <string>
#include <vector>

#include "lockstep/core/result.h"

namespace lockstep::data {

inline constexpr int32_t kLlmcTokensMagic = 20240520;
inline constexpr int32_t kLlmcTokensVersion = 1;
// llm.c's uint32 token files (dev/data/data_common.py, model_desc "llama-3").
inline constexpr int32_t kLlmcTokens32Magic = 20240801;
inline constexpr int32_t kLlmcTokens32Version = 7;
// lockstep's loss masks (`tokens --prompt-key/--response-key`): llm.c's header with this magic
// (the bytes "LMSK"), version 1, then one byte per token of the token file beside it: 1 where
// the loss counts that token as a target, 0 where it does not.
inline constexpr int32_t kLossMaskMagic = 0x4B534D4C;
inline constexpr int32_t kLossMaskVersion = 1;
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

  // Tokens [begin, begin + n) as int32 (either width).
  void Copy(int64_t begin, int64_t n, int32_t* out) const;
  uint32_t At(int64_t i) const {
    return width_ == 4   ? static_cast<const uint32_t*>(tokens_)[i]
           : width_ == 2 ? static_cast<const uint16_t*>(tokens_)[i]
                         : static_cast<const uint8_t*>(tokens_)[i];
  }
  int64_t size() const { return count_; }
  bool wide() const { return width_ == 4; }    // uint32 tokens (llm.c's magic 20240801)
  bool is_mask() const { return width_ == 1; }  // a loss mask (kLossMaskMagic)
  const std::string& path() const { return path_; }
  TokenFormat format() const { return format_; }  // kLlmc or kRaw

  // The largest token id and the index of its first occurrence, reading the file once in
  // chunks and releasing each chunk's pages after it (a scan of a huge file keeps RSS flat).
  struct MaxTokenAt {
    uint32_t value = 0;
    int64_t index = 0;
  };
  MaxTokenAt MaxToken() const;

  // Drops this process's mapping of the pages holding tokens [begin, end) (they stay in the
  // page cache): memory-mapped reads then never accumulate resident memory.
  void Release(int64_t begin, int64_t end) const;

 private:
  TokenFile() = default;
  void Unmap();
  template <typename Fn>
  decltype(auto) WithValues(Fn&& fn) const;

  std::string path_;
  TokenFormat format_ = TokenFormat::kRaw;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const void* tokens_ = nullptr;
  int64_t count_ = 0;
  int width_ = 2;  // bytes a value: 2, 4 (uint32 tokens) or 1 (a loss mask)
};

// Writes `tokens` as an llm.c token file (header + uint16), through a temporary file renamed
// into place.
Status WriteLlmcTokenFile(const std::string& path, std::span<const uint16_t> tokens);

// An llm.c token file written as it streams: uint16 tokens, or uint32 (llm.c's Llama 3 header)
// when `wide`. Tokens go to `path`.tmp; Finish() writes the count into the header, syncs and
// renames the file into place, so `path` is never a half-written file.
class LlmcTokenWriter {
 public:
  static Result<LlmcTokenWriter> Create(const std::string& path, bool wide);
  // A loss mask file (kLossMaskMagic): values 0 or 1, a byte each.
  static Result<LlmcTokenWriter> CreateLossMask(const std::string& path);
  LlmcTokenWriter(LlmcTokenWriter&& o) noexcept;
  LlmcTokenWriter& operator=(LlmcTokenWriter&&) = delete;
  ~LlmcTokenWriter();  // without Finish(): the temporary file is removed
  // Every token must fit the width (InvalidArgument naming it otherwise).
  Status Append(std::span<const int32_t> tokens);
  Status Finish();
  int64_t count() const { return count_; }

 private:
  LlmcTokenWriter() = default;
  std::string path_, tmp_;
  std::FILE* file_ = nullptr;
  int width_ = 2;
  int32_t magic_ = kLlmcTokensMagic, version_ = kLlmcTokensVersion;
  int64_t count_ = 0;
  std::vector<uint8_t> buffer_;
};

}  // namespace lockstep::data
