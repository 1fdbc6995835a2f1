// WindowSource: a stream of token ids that training windows are cut from — the bytes of a
// text corpus split, or the concatenated uint16 token files of a token corpus. The window
// loaders (text_loaders.h) only ever ask for `n` consecutive ids at a position, so both kinds
// of data go through one sampling code path and give the same windows for the same ids.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lockstep/data/token_file.h"

namespace lockstep::data {

class WindowSource {
 public:
  virtual ~WindowSource() = default;
  virtual int64_t size() const = 0;
  // out[i] = id at position begin + i, for i < n; [begin, begin + n) lies within size().
  virtual void Read(int64_t begin, int64_t n, int32_t* out) const = 0;
  // For messages: the directory or the files the stream comes from.
  virtual const std::string& name() const = 0;
  // A loss mask beside the ids (data.loss_mask): out[i] = 1 where the id at begin + i is a
  // trained target, 0 where it is not. Streams without one say so.
  virtual bool has_mask() const { return false; }
  virtual void ReadMask(int64_t begin, int64_t n, int32_t* out) const {}
};

// A span of bytes owned elsewhere (a ByteCorpus split): id = byte.
class ByteWindowSource final : public WindowSource {
 public:
  ByteWindowSource(std::span<const uint8_t> bytes, std::string name) : bytes_(bytes), name_(std::move(name)) {}
  int64_t size() const override { return static_cast<int64_t>(bytes_.size()); }
  void Read(int64_t begin, int64_t n, int32_t* out) const override {
    for (int64_t i = 0; i < n; ++i) out[i] = bytes_[static_cast<size_t>(begin + i)];
  }
  const std::string& name() const override { return name_; }

 private:
  std::span<const uint8_t> bytes_;
  std::string name_;
};

// Positions [begin, begin + size) of the concatenation of token files (in the given order):
// a window may straddle two files. Reads release the pages they touched (TokenFile::Release),
// so a long run over a huge corpus keeps a flat resident size.
class TokenStream final : public WindowSource {
 public:
  // `masks`: none, or one loss mask file per token file, of the same size.
  TokenStream(std::vector<std::shared_ptr<const TokenFile>> files, int64_t begin, int64_t size, std::string name,
              std::vector<std::shared_ptr<const TokenFile>> masks = {});
  int64_t size() const override { return size_; }
  void Read(int64_t begin, int64_t n, int32_t* out) const override { ReadFrom(files_, begin, n, out); }
  const std::string& name() const override { return name_; }
  bool has_mask() const override { return !masks_.empty(); }
  void ReadMask(int64_t begin, int64_t n, int32_t* out) const override { ReadFrom(masks_, begin, n, out); }
  const std::vector<std::shared_ptr<const TokenFile>>& files() const { return files_; }

 private:
  void ReadFrom(const std::vector<std::shared_ptr<const TokenFile>>& files, int64_t begin, int64_t n,
                int32_t* out) const;
  std::vector<std::shared_ptr<const TokenFile>> files_, masks_;
  std::vector<int64_t> starts_;  // position of each file's first token in the concatenation
  int64_t begin_ = 0, size_ = 0;
  std::string name_;
};

}  // namespace lockstep::data
