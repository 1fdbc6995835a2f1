#include "lockstep/data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

namespace lockstep::data {

static_assert(std::endian::native == std::endian::little, "token files are little-endian; so must the host be");

Result<TokenFormat> ParseTokenFormat(const std::string& text) {
  if (text == "auto") return TokenFormat::kAuto;
  if (text == "llmc") return TokenFormat::kLlmc;
  if (text == "raw") return TokenFormat::kRaw;
  return Status::InvalidArgument("data.format: expected \"auto\", \"llmc\" or \"raw\", got \"" + text + "\"");
}

namespace {

int64_t PageSize() {
  static const int64_t page = ::sysconf(_SC_PAGESIZE);
  return page;
}

}  // namespace

Result<TokenFile> TokenFile::Open(const std::string& path, TokenFormat format) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound("token file " + path + " does not exist");
    return Status::InvalidArgument("cannot read token file " + path + ": " + std::strerror(errno));
  }
  struct stat sb;
  if (::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument("token file " + path + " is not a regular file");
  }
  const int64_t bytes = sb.st_size;
  if (bytes == 0) {
    ::close(fd);
    return Status::InvalidArgument("token file " + path + " is empty");
  }
  TokenFile f;
  f.path_ = path;
  f.map_ = ::mmap(nullptr, static_cast<size_t>(bytes), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);  // the mapping keeps the file
  if (f.map_ == MAP_FAILED) {
    f.map_ = nullptr;
    return Status::InvalidArgument("cannot map token file " + path + ": " + std::strerror(errno));
  }
  f.map_bytes_ = static_cast<size_t>(bytes);
  // Windows are read at random places: no read-ahead beyond the page asked for.
  ::madvise(f.map_, f.map_bytes_, MADV_RANDOM);
  const auto* base = static_cast<const uint8_t*>(f.map_);
  int32_t header[3] = {0, 0, 0};
  std::memcpy(header, base, static_cast<size_t>(std::min<int64_t>(bytes, sizeof(header))));
  const bool llmc_magic =
      header[0] == kLlmcTokensMagic || header[0] == kLlmcTokens32Magic || header[0] == kLossMaskMagic;
  if (format == TokenFormat::kAuto) format = llmc_magic ? TokenFormat::kLlmc : TokenFormat::kRaw;
  f.format_ = format;
  if (format == TokenFormat::kRaw) {
    if (header[0] == kLlmcModelMagic)
      return Status::InvalidArgument("token file " + path +
                                     " is an llm.c model checkpoint (magic 20240326), not tokens");
    if (bytes % 2 != 0)
      return Status::InvalidArgument("token file " + path + " is truncated: " + std::to_string(bytes) +
                                     " bytes is not a whole number of uint16 tokens");
    f.tokens_ = base;
    f.count_ = bytes / 2;
    return f;
  }
  if (bytes < kLlmcHeaderBytes)
    return Status::InvalidArgument("token file " + path + " is truncated: " + std::to_string(bytes) +
                                   " bytes, shorter than llm.c's 1024-byte header");
  if (!llmc_magic)
    return Status::InvalidArgument("token file " + path + " has magic " + std::to_string(header[0]) +
                                   ", not llm.c's token magic 20240520 (uint16) or 20240801 (uint32)");
  f.width_ = header[0] == kLlmcTokens32Magic ? 4 : header[0] == kLossMaskMagic ? 1 : 2;
  const int32_t version = f.width_ == 4 ? kLlmcTokens32Version : f.width_ == 1 ? kLossMaskVersion : kLlmcTokensVersion;
  if (header[1] != version)
    return Status::InvalidArgument("token file " + path + " has llm.c version " + std::to_string(header[1]) +
                                   (f.width_ == 4   ? ", expected 7 (uint32 tokens)"
                                    : f.width_ == 1 ? ", expected 1 (a loss mask)"
                                                    : ", expected 1 (uint16 tokens)"));
  const int64_t width = f.width_;
  const int64_t count = header[2], have = (bytes - kLlmcHeaderBytes) / width;
  if (count <= 0)
    return Status::InvalidArgument("token file " + path + " has no tokens (header count " + std::to_string(count) +
                                   ")");
  if (bytes != kLlmcHeaderBytes + width * count)
    return Status::InvalidArgument("token file " + path + (have < count ? " is truncated" : " has trailing bytes") +
                                   ": its header says " + std::to_string(count) + " tokens (" +
                                   std::to_string(kLlmcHeaderBytes + width * count) + " bytes), the file has " +
                                   std::to_string(bytes) + " bytes");
  f.tokens_ = base + kLlmcHeaderBytes;
  f.count_ = count;
  return f;
}

TokenFile::TokenFile(TokenFile&& o) noexcept { *this = std::move(o); }

TokenFile& TokenFile::operator=(TokenFile&& o) noexcept {
  if (this == &o) return *this;
  Unmap();
  path_ = std::move(o.path_);
  format_ = o.format_;
  map_ = std::exchange(o.map_, nullptr);
  map_bytes_ = std::exchange(o.map_bytes_, 0);
  tokens_ = std::exchange(o.tokens_, nullptr);
  count_ = std::exchange(o.count_, 0);
  width_ = o.width_;
  return *this;
}

TokenFile::~TokenFile() { Unmap(); }

void TokenFile::Unmap() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
  map_ = nullptr;
}

void TokenFile::Release(int64_t begin, int64_t end) const {
  if (map_ == nullptr || begin >= end) return;
  const auto base = reinterpret_cast<uintptr_t>(map_);
  const int64_t page = PageSize();
  // Whole pages inside the mapping that hold any of the range (pages shared with a
  // neighbouring window only fault in again from the page cache).
  const int64_t width = width_;
  const auto first = reinterpret_cast<uintptr_t>(tokens_);
  const uintptr_t lo = (first + begin * width) & ~static_cast<uintptr_t>(page - 1);
  const uintptr_t hi = std::min<uintptr_t>(first + end * width, base + map_bytes_);
  if (lo < base || hi <= lo) return;
  ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

// Calls fn(values) with the mapped values as the type of this file's width.
template <typename Fn>
decltype(auto) TokenFile::WithValues(Fn&& fn) const {
  if (width_ == 1) return fn(static_cast<const uint8_t*>(tokens_));
  if (width_ == 4) return fn(static_cast<const uint32_t*>(tokens_));
  return fn(static_cast<const uint16_t*>(tokens_));
}

TokenFile::MaxTokenAt TokenFile::MaxToken() const {
  MaxTokenAt best;
  constexpr int64_t kChunk = int64_t{1} << 24;  // 32 MB of tokens
  for (int64_t begin = 0; begin < count_; begin += kChunk) {
    const int64_t end = std::min(count_, begin + kChunk);
    const MaxTokenAt chunk = WithValues([&](const auto* t) {
      auto mx = t[begin];
      for (int64_t i = begin; i < end; ++i) mx = std::max(mx, t[i]);
      return MaxTokenAt{static_cast<uint32_t>(mx), std::find(t + begin, t + end, mx) - t};
    });
    if (chunk.value > best.value || begin == 0) best = chunk;
    Release(begin, end);
  }
  return best;
}

void TokenFile::Copy(int64_t begin, int64_t n, int32_t* out) const {
  WithValues([&](const auto* t) {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(t[begin + i]);
  });
}

Status WriteLlmcTokenFile(const std::string& path, std::span<const uint16_t> tokens) {
  if (tokens.size() > static_cast<size_t>(INT32_MAX))
    return Status::InvalidArgument("llm.c token files hold at most 2^31-1 tokens; got " +
                                   std::to_string(tokens.size()) + " (write several shards)");
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return Status::InvalidArgument("cannot write " + tmp + ": " + std::strerror(errno));
  std::vector<int32_t> header(kLlmcHeaderInts, 0);
  header[0] = kLlmcTokensMagic;
  header[1] = kLlmcTokensVersion;
  header[2] = static_cast<int32_t>(tokens.size());
  bool ok = std::fwrite(header.data(), sizeof(int32_t), header.size(), f) == header.size();
  ok = ok && std::fwrite(tokens.data(), sizeof(uint16_t), tokens.size(), f) == tokens.size();
  ok = (std::fflush(f) == 0) && ok;
  ok = (::fsync(::fileno(f)) == 0) && ok;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status::IoError("cannot write token file " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

Result<LlmcTokenWriter> LlmcTokenWriter::CreateLossMask(const std::string& path) {
  LS_ASSIGN_OR_RETURN(LlmcTokenWriter w, Create(path, false));
  w.width_ = 1;
  w.magic_ = kLossMaskMagic;
  w.version_ = kLossMaskVersion;
  return w;
}

Result<LlmcTokenWriter> LlmcTokenWriter::Create(const std::string& path, bool wide) {
  LlmcTokenWriter w;
  w.path_ = path;
  w.tmp_ = path + ".tmp";
  w.width_ = wide ? 4 : 2;
  w.magic_ = wide ? kLlmcTokens32Magic : kLlmcTokensMagic;
  w.version_ = wide ? kLlmcTokens32Version : kLlmcTokensVersion;
  w.file_ = std::fopen(w.tmp_.c_str(), "wb");
  if (w.file_ == nullptr) return Status::InvalidArgument("cannot write " + w.tmp_ + ": " + std::strerror(errno));
  // The header's count is written by Finish(); zeros until then.
  std::vector<int32_t> header(kLlmcHeaderInts, 0);
  if (std::fwrite(header.data(), sizeof(int32_t), header.size(), w.file_) != header.size())
    return Status::IoError("cannot write " + w.tmp_ + ": " + std::strerror(errno));
  return w;
}

LlmcTokenWriter::LlmcTokenWriter(LlmcTokenWriter&& o) noexcept
    : path_(std::move(o.path_)),
      tmp_(std::move(o.tmp_)),
      file_(std::exchange(o.file_, nullptr)),
      width_(o.width_),
      magic_(o.magic_),
      version_(o.version_),
      count_(o.count_),
      buffer_(std::move(o.buffer_)) {}

LlmcTokenWriter::~LlmcTokenWriter() {
  if (file_ != nullptr) {
    std::fclose(file_);
    std::remove(tmp_.c_str());
  }
}

Status LlmcTokenWriter::Append(std::span<const int32_t> tokens) {
  const int64_t limit = width_ == 1 ? 2 : int64_t{1} << (8 * width_);
  const size_t width = static_cast<size_t>(width_);
  buffer_.resize(tokens.size() * width);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= limit)
      return Status::InvalidArgument("token " + std::to_string(tokens[i]) + " does not fit a " +
                                     (width_ == 4 ? "uint32 token file" : width_ == 2 ? "uint16 token file" : "loss mask (0 or 1)"));
    const uint32_t v = static_cast<uint32_t>(tokens[i]);
    std::memcpy(buffer_.data() + i * width, &v, width);  // little-endian host (static_assert above)
  }
  if (count_ + static_cast<int64_t>(tokens.size()) > INT32_MAX)
    return Status::InvalidArgument("llm.c token files hold at most 2^31-1 tokens (write several shards)");
  if (std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size())
    return Status::IoError("cannot write " + tmp_ + ": " + std::strerror(errno));
  count_ += static_cast<int64_t>(tokens.size());
  return Status::Ok();
}

Status LlmcTokenWriter::Finish() {
  int32_t header[3] = {magic_, version_, static_cast<int32_t>(count_)};
  bool ok = std::fseek(file_, 0, SEEK_SET) == 0 && std::fwrite(header, sizeof(int32_t), 3, file_) == 3;
  ok = (std::fflush(file_) == 0) && ok;
  ok = (::fsync(::fileno(file_)) == 0) && ok;
  ok = (std::fclose(file_) == 0) && ok;
  file_ = nullptr;
  if (!ok || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    std::remove(tmp_.c_str());
    return Status::IoError("cannot write token file " + path_ + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace lockstep::data
