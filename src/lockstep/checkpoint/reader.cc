// Checkpoint::Open: manifest and shard headers, cross-checked field by field.
#include "lockstep/checkpoint/reader.h"

#include <map>

#include "lockstep/checkpoint/json_util.h"
#include "lockstep/checkpoint/paths.h"
#include "lockstep/checkpoint/reader_impl.h"
#include "lockstep/checkpoint/safetensors.h"
#include "lockstep/core/hash.h"

namespace lockstep::checkpoint {
namespace {

using internal::Quote;

// Checks that one manifest shard matches the header entry that holds it.
Status MatchEntry(const std::string& path, const TensorInfo& t, const ShardInfo& s, const ShardEntry& e,
                  const ShardHeader& h) {
  const char* field = nullptr;
  if (e.tensor != t.name)
    field = "tensor name";
  else if (e.dtype != t.dtype)
    field = "dtype";
  else if (e.global_shape != t.shape)
    field = "shape";
  else if (e.begin != s.begin || e.end != s.end)
    field = "element range";
  else if (h.data_start() + e.data_begin != s.offset || e.data_end - e.data_begin != s.bytes)
    field = "byte offset";
  else if (e.xxh64 != s.xxh64)
    field = "xxh64";
  if (field == nullptr) return Status::Ok();
  return Status::Corruption(path + ": tensor " + Quote(t.name) +
                            ": shape/range mismatch: header and manifest disagree on " + field + " of key " +
                            Quote(s.key));
}

Status CheckFile(Checkpoint::Impl* impl, const FileInfo& f, std::map<std::string, ShardHeader>* headers) {
  const std::string path = impl->Path(f.name);
  Result<uint64_t> size = impl->env->GetFileSize(path);
  if (!size.ok()) {
    if (size.status().code() == StatusCode::kNotFound) return Status::NotFound(path + ": missing file");
    return size.status();
  }
  if (*size < f.bytes) {
    return Status::Corruption(path + ": truncated: " + std::to_string(*size) + " bytes, manifest says " +
                              std::to_string(f.bytes));
  }
  if (*size > f.bytes) {
    return Status::Corruption(path + ": size mismatch: " + std::to_string(*size) + " bytes, manifest says " +
                              std::to_string(f.bytes));
  }
  LS_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, impl->env->NewRandomAccessFile(path));
  LS_ASSIGN_OR_RETURN(ShardHeader h, ReadShardHeader(*file, path, *size, &f.header_xxh64));
  const Manifest& m = impl->manifest;
  if (h.step != m.step || h.world != m.world || h.rank != f.rank) {
    return Status::Corruption(path + ": header says step " + std::to_string(h.step) + " rank " +
                              std::to_string(h.rank) + " of " + std::to_string(h.world) + ", manifest says step " +
                              std::to_string(m.step) + " rank " + std::to_string(f.rank) + " of " +
                              std::to_string(m.world));
  }
  (*headers)[f.name] = std::move(h);
  impl->files[f.name] = std::move(file);
  return Status::Ok();
}

Status MatchHeaders(Checkpoint::Impl* impl, const std::map<std::string, ShardHeader>& headers) {
  std::map<std::string, std::map<std::string, const ShardEntry*>> keys;  // file -> key -> entry
  for (const auto& [file, h] : headers) {
    for (const ShardEntry& e : h.entries) keys[file][e.key] = &e;
  }
  std::map<std::string, size_t> used;
  for (const TensorInfo& t : impl->manifest.tensors) {
    for (const ShardInfo& s : t.shards) {
      const std::string path = impl->Path(s.file);
      auto it = keys[s.file].find(s.key);
      if (it == keys[s.file].end()) {
        return Status::Corruption(path + ": tensor " + Quote(t.name) + ": key " + Quote(s.key) +
                                  " missing from header");
      }
      LS_RETURN_IF_ERROR(MatchEntry(path, t, s, *it->second, headers.at(s.file)));
      ++used[s.file];
    }
  }
  for (const auto& [file, h] : headers) {
    if (used[file] != h.entries.size()) {
      return Status::Corruption(impl->Path(file) + ": header holds " + std::to_string(h.entries.size()) +
                                " tensors, manifest lists " + std::to_string(used[file]));
    }
  }
  return Status::Ok();
}

}  // namespace

Checkpoint::Checkpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;
Checkpoint::~Checkpoint() = default;

Result<Checkpoint> Checkpoint::Open(const std::string& dir, Env* env) {
  auto impl = std::make_unique<Impl>();
  impl->dir = dir;
  impl->env = env != nullptr ? env : Env::Default();
  if (!impl->env->IsDirectory(dir)) return Status::NotFound(dir + ": missing checkpoint directory");
  const std::string manifest_path = JoinPath(dir, kManifestFile);
  if (!impl->env->FileExists(manifest_path)) return Status::NotFound(manifest_path + ": missing file");
  LS_ASSIGN_OR_RETURN(std::string text, ReadFileToString(impl->env, manifest_path, kMaxManifestBytes));
  Result<Manifest> m = ParseManifest(text);
  if (!m.ok()) return m.status().WithContext(manifest_path);
  impl->manifest = std::move(m).value();
  std::map<std::string, ShardHeader> headers;
  for (const FileInfo& f : impl->manifest.files) LS_RETURN_IF_ERROR(CheckFile(impl.get(), f, &headers));
  LS_RETURN_IF_ERROR(MatchHeaders(impl.get(), headers));
  for (size_t i = 0; i < impl->manifest.tensors.size(); ++i) {
    impl->by_name[impl->manifest.tensors[i].name] = i;
    impl->verified.emplace_back(impl->manifest.tensors[i].shards.size(), 0);
  }
  return Checkpoint(std::move(impl));
}

const std::string& Checkpoint::dir() const { return impl_->dir; }
int64_t Checkpoint::step() const { return impl_->manifest.step; }
int64_t Checkpoint::world() const { return impl_->manifest.world; }
int64_t Checkpoint::format_version() const { return impl_->manifest.format_version; }
const nlohmann::json& Checkpoint::extra() const { return impl_->manifest.extra; }
const std::vector<TensorInfo>& Checkpoint::tensors() const { return impl_->manifest.tensors; }
const std::vector<FileInfo>& Checkpoint::files() const { return impl_->manifest.files; }

const TensorInfo* Checkpoint::Find(std::string_view name) const {
  auto it = impl_->by_name.find(name);
  return it == impl_->by_name.end() ? nullptr : &impl_->manifest.tensors[it->second];
}

Status Checkpoint::CheckConfigHash(const std::string& expected) const {
  const std::string where = JoinPath(impl_->dir, kManifestFile);
  auto it = impl_->manifest.extra.find("config_hash");
  if (it == impl_->manifest.extra.end() || !it->is_string()) {
    return Status::InvalidArgument(
        where + ": foreign checkpoint: it records no config_hash, so it cannot be matched to this config");
  }
  const std::string stored = it->get<std::string>();
  if (stored != expected) {
    return Status::InvalidArgument(where + ": foreign checkpoint: config hash mismatch: written by config " +
                                   Quote(stored) + ", this run's config hashes to " + Quote(expected));
  }
  return Status::Ok();
}

}  // namespace lockstep::checkpoint
