#include "lockstep/checkpoint/manifest.h"

#include <algorithm>
#include <map>
#include <set>

#include "lockstep/checkpoint/json_util.h"
#include "lockstep/core/hash.h"

namespace lockstep::checkpoint {
namespace {

using internal::json;
using internal::Quote;

constexpr std::string_view kPrefix = "{\"manifest_xxh64\": \"";
constexpr size_t kHexLen = 16;
constexpr std::string_view kMagic = "lockstep-checkpoint";
constexpr size_t kMaxCount = 1 << 20;

uint64_t HashWithZeroedChecksum(std::string_view text) {
  std::string copy(text);
  std::fill_n(copy.begin() + kPrefix.size(), kHexLen, '0');
  return Xxh64(copy.data(), copy.size());
}

Status GetHex(const json& obj, const char* key, std::string_view where, uint64_t* out) {
  std::string s;
  LS_RETURN_IF_ERROR(internal::GetString(obj, key, where, &s));
  std::optional<uint64_t> v = internal::ParseHex64(s);
  if (!v) return Status::Corruption(std::string(where) + ": field '" + key + "' is not 16 lowercase hex digits");
  *out = *v;
  return Status::Ok();
}

Status ParseFiles(const json& arr, Manifest* m) {
  std::set<std::string> names;
  for (size_t i = 0; i < arr.size(); ++i) {
    const std::string where = "files[" + std::to_string(i) + "]";
    FileInfo f;
    int64_t bytes = 0;
    LS_RETURN_IF_ERROR(internal::GetString(arr[i], "name", where, &f.name));
    LS_RETURN_IF_ERROR(internal::GetInt(arr[i], "rank", where, &f.rank));
    LS_RETURN_IF_ERROR(internal::GetInt(arr[i], "bytes", where, &bytes));
    LS_RETURN_IF_ERROR(GetHex(arr[i], "header_xxh64", where, &f.header_xxh64));
    if (!IsPlainFileName(f.name))
      return Status::Corruption(where + ": name " + Quote(f.name) + " is not a plain file name");
    if (!names.insert(f.name).second) return Status::Corruption(where + ": file " + Quote(f.name) + " listed twice");
    if (f.rank < 0 || f.rank >= m->world || bytes < 8) {
      return Status::Corruption(where + ": rank " + std::to_string(f.rank) + " or bytes " + std::to_string(bytes) +
                                " out of range");
    }
    f.bytes = static_cast<uint64_t>(bytes);
    m->files.push_back(std::move(f));
  }
  std::sort(m->files.begin(), m->files.end(), [](const FileInfo& a, const FileInfo& b) { return a.rank < b.rank; });
  return Status::Ok();
}

Status ParseShard(const json& s, const std::string& where, const TensorInfo& t,
                  const std::map<std::string, uint64_t>& file_bytes, ShardInfo* out) {
  int64_t offset = 0, bytes = 0;
  LS_RETURN_IF_ERROR(internal::GetString(s, "file", where, &out->file));
  LS_RETURN_IF_ERROR(internal::GetString(s, "key", where, &out->key));
  LS_RETURN_IF_ERROR(internal::GetInt(s, "begin", where, &out->begin));
  LS_RETURN_IF_ERROR(internal::GetInt(s, "end", where, &out->end));
  LS_RETURN_IF_ERROR(internal::GetInt(s, "offset", where, &offset));
  LS_RETURN_IF_ERROR(internal::GetInt(s, "bytes", where, &bytes));
  LS_RETURN_IF_ERROR(GetHex(s, "xxh64", where, &out->xxh64));
  auto f = file_bytes.find(out->file);
  if (f == file_bytes.end()) return Status::Corruption(where + ": file " + Quote(out->file) + " is not in 'files'");
  if (out->key.empty()) return Status::Corruption(where + ": empty key");
  if (out->begin < 0 || out->begin > out->end || out->end > t.numel) {
    return Status::Corruption(where + ": range [" + std::to_string(out->begin) + ", " + std::to_string(out->end) +
                              ") is outside [0, " + std::to_string(t.numel) + ")");
  }
  if (bytes != (out->end - out->begin) * DTypeSize(t.dtype)) {
    return Status::Corruption(where + ": bytes " + std::to_string(bytes) + " does not match range of " +
                              std::to_string(out->end - out->begin) + " " + StoredDTypeName(t.dtype) + " elements");
  }
  if (offset < 8 || static_cast<uint64_t>(offset) > f->second || static_cast<uint64_t>(bytes) > f->second - offset) {
    return Status::Corruption(where + ": bytes [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                              ") lie outside " + Quote(out->file) + " of " + std::to_string(f->second) + " bytes");
  }
  out->offset = static_cast<uint64_t>(offset);
  out->bytes = static_cast<uint64_t>(bytes);
  return Status::Ok();
}

Status ParseTensors(const json& arr, Manifest* m) {
  std::map<std::string, uint64_t> file_bytes;
  for (const FileInfo& f : m->files) file_bytes[f.name] = f.bytes;
  std::set<std::string> names;
  std::set<std::pair<std::string, std::string>> keys;  // (file, key) pairs are unique
  for (size_t i = 0; i < arr.size(); ++i) {
    std::string where = "tensors[" + std::to_string(i) + "]";
    TensorInfo t;
    LS_RETURN_IF_ERROR(internal::GetString(arr[i], "name", where, &t.name));
    if (t.name.empty()) return Status::Corruption(where + ": empty tensor name");
    where = "tensor " + Quote(t.name);
    if (!names.insert(t.name).second) return Status::Corruption(where + ": listed twice");
    std::string dtype;
    LS_RETURN_IF_ERROR(internal::GetString(arr[i], "dtype", where, &dtype));
    std::optional<DType> d = ParseStoredDType(dtype);
    if (!d) return Status::Corruption(where + ": unknown dtype " + Quote(dtype));
    t.dtype = *d;
    LS_RETURN_IF_ERROR(internal::GetDims(arr[i], "shape", where, &t.shape));
    std::optional<int64_t> numel = internal::NumElements(t.shape, DTypeSize(t.dtype));
    if (!numel) return Status::Corruption(where + ": shape " + internal::ShapeString(t.shape) + " overflows");
    t.numel = *numel;
    const json* shards = nullptr;
    LS_RETURN_IF_ERROR(internal::GetArray(arr[i], "shards", where, &shards));
    if (shards->size() > kMaxCount) return Status::Corruption(where + ": too many shards");
    for (size_t j = 0; j < shards->size(); ++j) {
      ShardInfo s;
      LS_RETURN_IF_ERROR(ParseShard((*shards)[j], where + ": shard " + std::to_string(j), t, file_bytes, &s));
      if (!keys.insert({s.file, s.key}).second) {
        return Status::Corruption(where + ": key " + Quote(s.key) + " of " + Quote(s.file) + " used twice");
      }
      t.shards.push_back(std::move(s));
    }
    LS_RETURN_IF_ERROR(CheckTiling(&t));
    m->tensors.push_back(std::move(t));
  }
  std::sort(m->tensors.begin(), m->tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  return Status::Ok();
}

}  // namespace

bool IsPlainFileName(std::string_view name) {
  if (name.empty() || name.size() > 255 || name == "." || name == "..") return false;
  for (char c : name) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Status CheckTiling(TensorInfo* t) {
  std::stable_sort(t->shards.begin(), t->shards.end(),
                   [](const ShardInfo& a, const ShardInfo& b) { return a.begin < b.begin; });
  int64_t covered = 0;
  std::string prev = "the start";
  for (const ShardInfo& s : t->shards) {
    if (s.begin == s.end) continue;  // an empty piece (a rank holding nothing of it)
    const std::string here = Quote(s.file) + " [" + std::to_string(s.begin) + ", " + std::to_string(s.end) + ")";
    if (s.begin > covered) {
      return Status::Corruption("tensor " + Quote(t->name) + ": shards do not tile [0, " + std::to_string(t->numel) +
                                "): gap [" + std::to_string(covered) + ", " + std::to_string(s.begin) + ") between " +
                                prev + " and " + here);
    }
    if (s.begin < covered) {
      return Status::Corruption("tensor " + Quote(t->name) + ": shards do not tile [0, " + std::to_string(t->numel) +
                                "): " + here + " overlaps " + prev);
    }
    covered = s.end;
    prev = here;
  }
  if (covered != t->numel) {
    return Status::Corruption("tensor " + Quote(t->name) + ": shards do not tile [0, " + std::to_string(t->numel) +
                              "): elements [" + std::to_string(covered) + ", " + std::to_string(t->numel) +
                              ") are in no shard");
  }
  return Status::Ok();
}

Result<std::string> SerializeManifest(const Manifest& m) {
  // Hand-laid-out JSON: scalar fields one per line, then one line per file and per tensor, so
  // the file stays small, diffable and greppable. Any JSON layout parses; only the prefix with
  // the checksum is fixed.
  try {
    std::string text = std::string(kPrefix) + std::string(kHexLen, '0') + "\",\n";
    text += " \"format\": \"" + std::string(kMagic) + "\",\n";
    text += " \"format_version\": " + std::to_string(m.format_version) + ",\n";
    text += " \"step\": " + std::to_string(m.step) + ",\n";
    text += " \"world\": " + std::to_string(m.world) + ",\n";
    text += " \"extra\": " + (m.extra.is_null() ? json::object() : m.extra).dump() + ",\n";
    text += " \"files\": [";
    for (size_t i = 0; i < m.files.size(); ++i) {
      const FileInfo& f = m.files[i];
      json line = {{"name", f.name}, {"rank", f.rank}, {"bytes", f.bytes}, {"header_xxh64", HexU64(f.header_xxh64)}};
      text += (i ? ",\n  " : "\n  ") + line.dump();
    }
    text += "\n ],\n \"tensors\": [";
    for (size_t i = 0; i < m.tensors.size(); ++i) {
      const TensorInfo& t = m.tensors[i];
      json shards = json::array();
      for (const ShardInfo& s : t.shards) {
        shards.push_back({{"file", s.file},
                          {"key", s.key},
                          {"begin", s.begin},
                          {"end", s.end},
                          {"offset", s.offset},
                          {"bytes", s.bytes},
                          {"xxh64", HexU64(s.xxh64)}});
      }
      json line = {
          {"name", t.name}, {"dtype", StoredDTypeName(t.dtype)}, {"shape", t.shape}, {"shards", std::move(shards)}};
      text += (i ? ",\n  " : "\n  ") + line.dump();
    }
    text += "\n ]\n}\n";
    std::string hex = HexU64(HashWithZeroedChecksum(text));
    std::copy(hex.begin(), hex.end(), text.begin() + kPrefix.size());
    return text;
  } catch (const json::exception& e) {  // invalid UTF-8 in extra or a name
    return Status::InvalidArgument(std::string("cannot encode manifest: ") + e.what());
  }
}

Result<Manifest> ParseManifest(std::string_view text) {
  if (text.size() < kPrefix.size() + kHexLen + 2 || text.substr(0, kPrefix.size()) != kPrefix ||
      text.substr(kPrefix.size() + kHexLen, 2) != "\",") {
    return Status::Corruption("does not start with its manifest_xxh64 checksum (torn or not a lockstep manifest)");
  }
  std::optional<uint64_t> stored = internal::ParseHex64(text.substr(kPrefix.size(), kHexLen));
  uint64_t actual = HashWithZeroedChecksum(text);
  if (!stored || *stored != actual) {
    return Status::Corruption("checksum mismatch: manifest_xxh64 says " + Quote(text.substr(kPrefix.size(), kHexLen)) +
                              ", content hashes to " + HexU64(actual));
  }
  LS_ASSIGN_OR_RETURN(json j, internal::ParseJson(text, 64));
  if (!j.is_object()) return Status::Corruption("not a JSON object");
  Manifest m;
  std::string format;
  LS_RETURN_IF_ERROR(internal::GetString(j, "format", "manifest", &format));
  if (format != kMagic) return Status::Corruption("format " + Quote(format) + " is not " + std::string(kMagic));
  LS_RETURN_IF_ERROR(internal::GetInt(j, "format_version", "manifest", &m.format_version));
  if (m.format_version != 1) {
    return Status::Corruption("unsupported format_version " + std::to_string(m.format_version) +
                              " (this build reads 1)");
  }
  LS_RETURN_IF_ERROR(internal::GetInt(j, "step", "manifest", &m.step));
  LS_RETURN_IF_ERROR(internal::GetInt(j, "world", "manifest", &m.world));
  if (m.step < 0 || m.world < 1 || m.world > (1 << 20)) {
    return Status::Corruption("step " + std::to_string(m.step) + " or world " + std::to_string(m.world) +
                              " out of range");
  }
  const json* extra = nullptr;
  LS_RETURN_IF_ERROR(internal::GetObject(j, "extra", "manifest", &extra));
  m.extra = *extra;
  const json* files = nullptr;
  const json* tensors = nullptr;
  LS_RETURN_IF_ERROR(internal::GetArray(j, "files", "manifest", &files));
  LS_RETURN_IF_ERROR(internal::GetArray(j, "tensors", "manifest", &tensors));
  if (files->size() > kMaxCount || tensors->size() > kMaxCount) return Status::Corruption("too many files or tensors");
  LS_RETURN_IF_ERROR(ParseFiles(*files, &m));
  LS_RETURN_IF_ERROR(ParseTensors(*tensors, &m));
  return m;
}

}  // namespace lockstep::checkpoint
