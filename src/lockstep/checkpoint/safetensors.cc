#include "lockstep/checkpoint/safetensors.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "lockstep/checkpoint/json_util.h"
#include "lockstep/core/hash.h"

namespace lockstep::checkpoint {
namespace {

using internal::json;
using internal::Quote;

constexpr const char* kMetaKey = "__metadata__";
constexpr size_t kMaxEntries = 1 << 20;

std::string MetaKey(const std::string& key, const char* field) { return key + ":" + field; }

// The piece's local shape: the global shape for a whole tensor, else one dimension.
std::vector<int64_t> LocalShape(const ShardEntry& e, int64_t global_numel) {
  if (e.begin == 0 && e.end == global_numel) return e.global_shape;
  return {e.end - e.begin};
}

Status Bad(const std::string& what) { return Status::Corruption("bad header: " + what); }

}  // namespace

Result<std::string> EncodeShardHeader(int64_t step, int64_t rank, int64_t world, std::vector<ShardEntry>* entries) {
  json meta = json::object();
  meta["lockstep.format_version"] = std::to_string(kFormatVersion);
  meta["lockstep.step"] = std::to_string(step);
  meta["lockstep.rank"] = std::to_string(rank);
  meta["lockstep.world"] = std::to_string(world);
  json header = json::object();
  uint64_t offset = 0;
  for (ShardEntry& e : *entries) {
    if (e.key == kMetaKey || header.contains(e.key)) {
      return Status::InvalidArgument("shard key " + Quote(e.key) + " repeats or is reserved");
    }
    int64_t numel = internal::NumElements(e.global_shape, 1).value_or(0);
    e.data_begin = offset;
    offset += static_cast<uint64_t>((e.end - e.begin) * DTypeSize(e.dtype));
    e.data_end = offset;
    header[e.key] = {{"dtype", StoredDTypeName(e.dtype)},
                     {"shape", LocalShape(e, numel)},
                     {"data_offsets", {e.data_begin, e.data_end}}};
    meta[MetaKey(e.key, "tensor")] = e.tensor;
    meta[MetaKey(e.key, "global_shape")] = internal::JoinInts(e.global_shape);
    meta[MetaKey(e.key, "range")] = std::to_string(e.begin) + "," + std::to_string(e.end);
    meta[MetaKey(e.key, "xxh64")] = HexU64(e.xxh64);
  }
  header[kMetaKey] = std::move(meta);
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {  // invalid UTF-8 in a name
    return Status::InvalidArgument(std::string("cannot encode shard header: ") + e.what());
  }
  while ((8 + text.size()) % 8 != 0) text += ' ';
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + text;
}

Result<ShardHeader> ParseShardHeader(std::string_view header_json) {
  LS_ASSIGN_OR_RETURN(json h, internal::ParseJson(header_json, 8));
  if (!h.is_object()) return Bad("not a JSON object");
  auto meta_it = h.find(kMetaKey);
  if (meta_it == h.end() || !meta_it->is_object()) return Bad("'__metadata__' missing or not an object");
  const json& meta = *meta_it;
  auto meta_str = [&](const std::string& k, std::string* out) -> Status {
    auto it = meta.find(k);
    if (it == meta.end() || !it->is_string()) return Bad("__metadata__ " + Quote(k) + " missing or not a string");
    *out = it->get<std::string>();
    return Status::Ok();
  };
  auto meta_int = [&](const std::string& k, int64_t* out) -> Status {
    std::string s;
    LS_RETURN_IF_ERROR(meta_str(k, &s));
    std::optional<int64_t> v = internal::ParseDecimal(s);
    if (!v) return Bad("__metadata__ " + Quote(k) + " = " + Quote(s) + " is not a decimal integer");
    *out = *v;
    return Status::Ok();
  };
  int64_t version = 0;
  LS_RETURN_IF_ERROR(meta_int("lockstep.format_version", &version));
  if (version != kFormatVersion) {
    return Status::Corruption("unsupported format_version " + std::to_string(version) + " (this build reads " +
                              std::to_string(kFormatVersion) + ")");
  }
  ShardHeader out;
  LS_RETURN_IF_ERROR(meta_int("lockstep.step", &out.step));
  LS_RETURN_IF_ERROR(meta_int("lockstep.rank", &out.rank));
  LS_RETURN_IF_ERROR(meta_int("lockstep.world", &out.world));
  if (out.world < 1 || out.rank >= out.world) return Bad("rank/world out of range");
  if (h.size() - 1 > kMaxEntries) return Bad("more than " + std::to_string(kMaxEntries) + " tensors");
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == kMetaKey) continue;
    ShardEntry e;
    e.key = it.key();
    const std::string where = "tensor " + Quote(e.key);
    const json& t = it.value();
    if (e.key.empty() || !t.is_object()) return Bad(where + ": entry is not an object");
    std::string dtype;
    LS_RETURN_IF_ERROR(internal::GetString(t, "dtype", where, &dtype));
    std::optional<DType> d = ParseStoredDType(dtype);
    if (!d) return Status::Corruption(where + ": unknown dtype " + Quote(dtype));
    e.dtype = *d;
    std::vector<int64_t> shape;
    LS_RETURN_IF_ERROR(internal::GetDims(t, "shape", where, &shape));
    const json* offs = nullptr;
    LS_RETURN_IF_ERROR(internal::GetArray(t, "data_offsets", where, &offs));
    int64_t b = -1, en = -1;
    if (offs->size() == 2) {
      b = internal::AsInt64((*offs)[0]).value_or(-1);
      en = internal::AsInt64((*offs)[1]).value_or(-1);
    }
    if (b < 0 || en < b) return Bad(where + ": data_offsets is not [begin, end] with 0 <= begin <= end");
    e.data_begin = static_cast<uint64_t>(b);
    e.data_end = static_cast<uint64_t>(en);
    std::optional<int64_t> local_numel = internal::NumElements(shape, DTypeSize(e.dtype));
    if (!local_numel || static_cast<uint64_t>(*local_numel * DTypeSize(e.dtype)) != e.data_end - e.data_begin) {
      return Status::Corruption(where + ": shape/size mismatch: shape " + internal::ShapeString(shape) + " of " +
                                dtype + " does not match " + std::to_string(e.data_end - e.data_begin) + " data bytes");
    }
    // lockstep metadata for this piece.
    LS_RETURN_IF_ERROR(meta_str(MetaKey(e.key, "tensor"), &e.tensor));
    if (e.tensor.empty()) return Bad(where + ": empty tensor name");
    std::string s;
    LS_RETURN_IF_ERROR(meta_str(MetaKey(e.key, "global_shape"), &s));
    std::optional<std::vector<int64_t>> gs = internal::SplitInts(s);
    std::optional<int64_t> numel = gs ? internal::NumElements(*gs, DTypeSize(e.dtype)) : std::nullopt;
    if (!numel) return Bad(where + ": global_shape " + Quote(s) + " is not a valid shape");
    e.global_shape = *gs;
    LS_RETURN_IF_ERROR(meta_str(MetaKey(e.key, "range"), &s));
    std::optional<std::vector<int64_t>> range = internal::SplitInts(s);
    if (!range || range->size() != 2 || (*range)[0] > (*range)[1] || (*range)[1] > *numel) {
      return Status::Corruption(where + ": shape/range mismatch: range " + Quote(s) + " is not begin,end within [0, " +
                                std::to_string(*numel) + "]");
    }
    e.begin = (*range)[0];
    e.end = (*range)[1];
    if (shape != LocalShape(e, *numel)) {
      return Status::Corruption(where + ": shape/range mismatch: shape " + internal::ShapeString(shape) +
                                " does not match range " + s + " of global shape " +
                                internal::ShapeString(e.global_shape));
    }
    LS_RETURN_IF_ERROR(meta_str(MetaKey(e.key, "xxh64"), &s));
    std::optional<uint64_t> x = internal::ParseHex64(s);
    if (!x) return Bad(where + ": xxh64 " + Quote(s) + " is not 16 lowercase hex digits");
    e.xxh64 = *x;
    out.entries.push_back(std::move(e));
  }
  // safetensors: pieces are contiguous, in offset order, and cover the data section exactly.
  std::sort(out.entries.begin(), out.entries.end(), [](const ShardEntry& a, const ShardEntry& b) {
    return a.data_begin != b.data_begin ? a.data_begin < b.data_begin : a.data_end < b.data_end;
  });
  uint64_t at = 0;
  for (const ShardEntry& e : out.entries) {
    if (e.data_begin != at) {
      return Status::Corruption("tensor " + Quote(e.key) + ": data_offsets start at " + std::to_string(e.data_begin) +
                                ", expected " + std::to_string(at) + " (gap or overlap)");
    }
    at = e.data_end;
  }
  out.data_bytes = at;
  return out;
}

Result<ShardHeader> ReadShardHeader(const RandomAccessFile& file, const std::string& path, uint64_t file_size,
                                    const uint64_t* expected_header_xxh64) {
  unsigned char len_bytes[8];
  if (file_size < 8) {
    return Status::Corruption(path + ": truncated: " + std::to_string(file_size) +
                              " bytes, shorter than the 8-byte header length");
  }
  LS_RETURN_IF_ERROR(ReadExactly(file, path, 0, 8, len_bytes));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  if (n < 2 || n > kMaxShardHeaderBytes || 8 + n > file_size) {
    return Status::Corruption(path + ": bad header length " + std::to_string(n) + " (file has " +
                              std::to_string(file_size) + " bytes)");
  }
  std::string text(8 + n, '\0');
  std::copy(len_bytes, len_bytes + 8, text.begin());
  LS_RETURN_IF_ERROR(ReadExactly(file, path, 8, n, text.data() + 8));
  const uint64_t header_xxh64 = Xxh64(text.data(), text.size());
  if (expected_header_xxh64 != nullptr && *expected_header_xxh64 != header_xxh64) {
    return Status::Corruption(path + ": header checksum mismatch (xxh64 " + HexU64(header_xxh64) + ", manifest says " +
                              HexU64(*expected_header_xxh64) + ")");
  }
  Result<ShardHeader> parsed = ParseShardHeader(std::string_view(text).substr(8));
  if (!parsed.ok()) return parsed.status().WithContext(path);
  ShardHeader h = std::move(parsed).value();
  h.header_len = n;
  h.header_xxh64 = header_xxh64;
  if (file_size < h.file_size()) {
    return Status::Corruption(path + ": truncated: " + std::to_string(file_size) + " bytes, header describes " +
                              std::to_string(h.file_size()));
  }
  if (file_size > h.file_size()) {
    return Status::Corruption(path + ": size mismatch: " + std::to_string(file_size) + " bytes, header describes " +
                              std::to_string(h.file_size()) + " (trailing bytes)");
  }
  return h;
}

}  // namespace lockstep::checkpoint
