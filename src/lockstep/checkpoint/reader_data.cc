// Checkpoint::Read / Verify: tensor data, streamed in large chunks and checked against xxh64.
#include <algorithm>
#include <cstring>

#include "lockstep/checkpoint/json_util.h"
#include "lockstep/checkpoint/reader.h"
#include "lockstep/checkpoint/reader_impl.h"
#include "lockstep/core/hash.h"

namespace lockstep::checkpoint {
namespace {

constexpr uint64_t kReadChunk = 8u << 20;

Status ChecksumMismatch(const std::string& path, const TensorInfo& t, const ShardInfo& s, uint64_t actual) {
  return Status::Corruption(path + ": tensor " + internal::Quote(t.name) + ": checksum mismatch in elements [" +
                            std::to_string(s.begin) + ", " + std::to_string(s.end) + ") (xxh64 " + HexU64(actual) +
                            ", manifest says " + HexU64(s.xxh64) + ")");
}

}  // namespace

// Copies elements [lo, hi) (within shard s of tensor t) to dst. The first time a shard is
// touched the whole of it is streamed through xxh64; bytes of it that are wanted are read
// straight into dst, the rest through a bounded scratch buffer. hi == lo only verifies.
Status Checkpoint::ReadPiece(size_t ti, size_t si, int64_t lo, int64_t hi, char* dst) const {
  const TensorInfo& t = impl_->manifest.tensors[ti];
  const ShardInfo& s = t.shards[si];
  const std::string path = impl_->Path(s.file);
  const RandomAccessFile& file = *impl_->files.at(s.file);
  const uint64_t esize = static_cast<uint64_t>(DTypeSize(t.dtype));
  const uint64_t want_lo = static_cast<uint64_t>(lo - s.begin) * esize;  // bytes within the piece
  const uint64_t want_hi = static_cast<uint64_t>(hi - s.begin) * esize;
  bool verified;
  {
    std::lock_guard<std::mutex> l(impl_->mu);
    verified = impl_->verified[ti][si] != 0;
  }
  if (verified) {
    return ReadExactly(file, path, s.offset + want_lo, static_cast<size_t>(want_hi - want_lo), dst);
  }
  Xxh64Stream hash;
  std::vector<char> scratch;
  for (uint64_t c0 = 0; c0 < s.bytes; c0 += kReadChunk) {
    const uint64_t c1 = std::min(s.bytes, c0 + kReadChunk);
    const size_t n = static_cast<size_t>(c1 - c0);
    char* buf;
    if (c0 >= want_lo && c1 <= want_hi) {
      buf = dst + (c0 - want_lo);  // wholly wanted: read in place
    } else {
      scratch.resize(static_cast<size_t>(std::min<uint64_t>(s.bytes, kReadChunk)));
      buf = scratch.data();
    }
    LS_RETURN_IF_ERROR(ReadExactly(file, path, s.offset + c0, n, buf));
    hash.Update(buf, n);
    if (buf == scratch.data()) {
      const uint64_t a = std::max(c0, want_lo), b = std::min(c1, want_hi);
      if (a < b) std::memcpy(dst + (a - want_lo), buf + (a - c0), static_cast<size_t>(b - a));
    }
  }
  const uint64_t actual = hash.Digest();
  if (actual != s.xxh64) return ChecksumMismatch(path, t, s, actual);
  std::lock_guard<std::mutex> l(impl_->mu);
  impl_->verified[ti][si] = 1;
  return Status::Ok();
}

Status Checkpoint::Read(const std::string& name, int64_t begin, int64_t end, void* out) const {
  auto it = impl_->by_name.find(name);
  if (it == impl_->by_name.end()) {
    return Status::NotFound(impl_->dir + ": no tensor " + internal::Quote(name) + " in this checkpoint");
  }
  const size_t ti = it->second;
  const TensorInfo& t = impl_->manifest.tensors[ti];
  if (begin < 0 || begin > end || end > t.numel) {
    return Status::InvalidArgument(impl_->dir + ": tensor " + internal::Quote(name) + ": range [" +
                                   std::to_string(begin) + ", " + std::to_string(end) + ") is outside [0, " +
                                   std::to_string(t.numel) + ")");
  }
  char* dst = static_cast<char*>(out);
  const int64_t esize = DTypeSize(t.dtype);
  for (size_t si = 0; si < t.shards.size(); ++si) {
    const ShardInfo& s = t.shards[si];
    const int64_t lo = std::max(begin, s.begin), hi = std::min(end, s.end);
    if (lo >= hi) continue;  // shards tile [0, numel) (checked at Open), so the union is exact
    LS_RETURN_IF_ERROR(ReadPiece(ti, si, lo, hi, dst + (lo - begin) * esize));
  }
  return Status::Ok();
}

std::vector<Status> Checkpoint::CheckShards(size_t tensor_index) const {
  std::vector<Status> out;
  const TensorInfo& t = impl_->manifest.tensors.at(tensor_index);
  for (size_t si = 0; si < t.shards.size(); ++si) {
    {
      std::lock_guard<std::mutex> l(impl_->mu);
      impl_->verified[tensor_index][si] = 0;  // force a full reread
    }
    out.push_back(ReadPiece(tensor_index, si, t.shards[si].begin, t.shards[si].begin, nullptr));
  }
  return out;
}

Status Checkpoint::Verify() const {
  // In file order, so each shard file is read front to back.
  struct Piece {
    const std::string* file;
    uint64_t offset;
    size_t ti, si;
  };
  std::vector<Piece> pieces;
  for (size_t ti = 0; ti < impl_->manifest.tensors.size(); ++ti) {
    const TensorInfo& t = impl_->manifest.tensors[ti];
    for (size_t si = 0; si < t.shards.size(); ++si) pieces.push_back({&t.shards[si].file, t.shards[si].offset, ti, si});
  }
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) {
    return *a.file != *b.file ? *a.file < *b.file : a.offset < b.offset;
  });
  Status first;
  size_t bad = 0;
  for (const Piece& p : pieces) {
    {
      std::lock_guard<std::mutex> l(impl_->mu);
      impl_->verified[p.ti][p.si] = 0;
    }
    const int64_t b = impl_->manifest.tensors[p.ti].shards[p.si].begin;
    Status s = ReadPiece(p.ti, p.si, b, b, nullptr);
    if (!s.ok() && bad++ == 0) first = s;
  }
  if (bad <= 1) return first;
  return Status(first.code(), first.message() + " (and " + std::to_string(bad - 1) + " more bad pieces)");
}

}  // namespace lockstep::checkpoint
