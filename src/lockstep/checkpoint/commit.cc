// CheckpointWriter::Commit: manifest from the shard headers, the durable rename, `latest`,
// and pruning. The order of operations is the crash-safety argument; see writer.h.
#include <algorithm>
#include <map>

#include "lockstep/checkpoint/json_util.h"
#include "lockstep/checkpoint/manifest.h"
#include "lockstep/checkpoint/paths.h"
#include "lockstep/checkpoint/resolve.h"
#include "lockstep/checkpoint/safetensors.h"
#include "lockstep/checkpoint/writer.h"
#include "lockstep/core/log.h"

namespace lockstep::checkpoint {
namespace {

Status AsInvalidArgument(const Status& s) {
  return s.code() == StatusCode::kCorruption ? Status::InvalidArgument(s.message()) : s;
}

// Reads every rank's shard header from dir and assembles the manifest's files and tensors.
Status CollectShards(Env* env, const std::string& dir, int64_t step, int world, Manifest* m) {
  std::map<std::string, TensorInfo> tensors;
  for (int r = 0; r < world; ++r) {
    const std::string name = ShardFileName(r);
    const std::string path = JoinPath(dir, name);
    Result<uint64_t> size = env->GetFileSize(path);
    if (!size.ok()) {
      return Status::NotFound(path + ": missing file: rank " + std::to_string(r) + " wrote no shard");
    }
    LS_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, env->NewRandomAccessFile(path));
    LS_ASSIGN_OR_RETURN(ShardHeader h, ReadShardHeader(*file, path, *size));
    if (h.step != step || h.rank != r || h.world != world) {
      return Status::Corruption(path + ": stale shard: written for step " + std::to_string(h.step) + " rank " +
                                std::to_string(h.rank) + " of " + std::to_string(h.world) + ", expected step " +
                                std::to_string(step) + " rank " + std::to_string(r) + " of " + std::to_string(world));
    }
    m->files.push_back(FileInfo{name, r, *size, h.header_xxh64});
    for (const ShardEntry& e : h.entries) {
      auto [it, inserted] = tensors.try_emplace(e.tensor);
      TensorInfo& t = it->second;
      if (inserted) {
        t.name = e.tensor;
        t.dtype = e.dtype;
        t.shape = e.global_shape;
        t.numel = internal::NumElements(e.global_shape, DTypeSize(e.dtype)).value_or(0);
      } else if (t.dtype != e.dtype || t.shape != e.global_shape) {
        return Status::InvalidArgument("tensor " + internal::Quote(e.tensor) + ": " + path + " stores it as " +
                                       StoredDTypeName(e.dtype) + " " + internal::ShapeString(e.global_shape) +
                                       ", another shard as " + StoredDTypeName(t.dtype) + " " +
                                       internal::ShapeString(t.shape));
      }
      t.shards.push_back(
          ShardInfo{name, e.key, e.begin, e.end, h.data_start() + e.data_begin, e.data_end - e.data_begin, e.xxh64});
    }
  }
  for (auto& [name, t] : tensors) {
    LS_RETURN_IF_ERROR(AsInvalidArgument(CheckTiling(&t)));
    m->tensors.push_back(std::move(t));
  }
  return Status::Ok();
}

// Renames root/name to root/name.trash (so it never again looks complete), then deletes it.
// The rename is made durable before anything inside is removed: a power loss may otherwise
// keep the removals and lose the rename, leaving a half-deleted checkpoint under its
// complete name.
Status Discard(Env* env, const std::string& root, const std::string& name) {
  const std::string path = JoinPath(root, name), trash = path + ".trash";
  LS_RETURN_IF_ERROR(RemoveDirRecursive(env, trash));
  LS_RETURN_IF_ERROR(env->RenameFile(path, trash));
  LS_RETURN_IF_ERROR(env->SyncDir(root));
  return RemoveDirRecursive(env, trash);
}

}  // namespace

Status CheckpointWriter::Commit(const nlohmann::json& extra) {
  if (rank_ != 0)
    return Status::InvalidArgument("Commit called on rank " + std::to_string(rank_) + "; only rank 0 commits");
  if (committed_) return Status::InvalidArgument(final_dir_ + ": already committed");
  if (!extra.is_null() && !extra.is_object()) return Status::InvalidArgument("checkpoint extra must be a JSON object");
  // Leftovers of an earlier crashed attempt at this step: anything but this world's shards.
  LS_ASSIGN_OR_RETURN(std::vector<std::string> children, env_->GetChildren(tmp_dir_));
  for (const std::string& c : children) {
    bool ours = false;
    for (int r = 0; r < world_ && !ours; ++r) ours = c == ShardFileName(r);
    if (!ours) LS_RETURN_IF_ERROR(RemoveDirRecursive(env_, JoinPath(tmp_dir_, c)));
  }
  Manifest m;
  m.step = step_;
  m.world = world_;
  m.extra = extra.is_null() ? nlohmann::json::object() : extra;
  LS_RETURN_IF_ERROR(CollectShards(env_, tmp_dir_, step_, world_, &m));
  LS_ASSIGN_OR_RETURN(std::string text, SerializeManifest(m));
  LS_RETURN_IF_ERROR(WriteFileDurably(env_, JoinPath(tmp_dir_, kManifestFile), text));
  LS_RETURN_IF_ERROR(env_->SyncDir(tmp_dir_));
  // The commit point: the directory appears under its final name.
  bool swapped_old = false;
  if (env_->FileExists(final_dir_)) {
    // Re-saving a step that exists (a run resumed from an older checkpoint): swap atomically so
    // `latest`, which may name it, never dangles; fall back to delete-then-rename.
    Status swapped = env_->ExchangePaths(tmp_dir_, final_dir_);
    if (swapped.code() == StatusCode::kUnimplemented) {
      LS_RETURN_IF_ERROR(Discard(env_, root_, StepDirName(step_)));
      LS_RETURN_IF_ERROR(env_->RenameFile(tmp_dir_, final_dir_));
    } else {
      LS_RETURN_IF_ERROR(swapped);
      swapped_old = true;  // the replaced checkpoint now sits at tmp_dir_
    }
  } else {
    LS_RETURN_IF_ERROR(env_->RenameFile(tmp_dir_, final_dir_));
  }
  LS_RETURN_IF_ERROR(env_->SyncDir(root_));
  LS_RETURN_IF_ERROR(PublishLatest());
  committed_ = true;
  if (swapped_old) {
    Status s = RemoveDirRecursive(env_, tmp_dir_);
    if (!s.ok()) {
      LS_LOG(WARN) << "checkpoint: removing the replaced " << final_dir_ << ": " << s.message();
    }
  }
  Prune();
  return Status::Ok();
}

Status CheckpointWriter::PublishLatest() {
  const std::string tmp = JoinPath(root_, std::string(kLatestFile) + ".tmp");
  LS_RETURN_IF_ERROR(WriteFileDurably(env_, tmp, StepDirName(step_) + "\n"));
  LS_RETURN_IF_ERROR(env_->RenameFile(tmp, JoinPath(root_, kLatestFile)));
  return env_->SyncDir(root_);
}

// Best effort: a failure here leaves extra directories, never a wrong `latest`, so it is
// logged rather than returned.
void CheckpointWriter::Prune() {
  Result<std::vector<std::string>> children = env_->GetChildren(root_);
  if (!children.ok()) {
    LS_LOG(WARN) << "checkpoint pruning skipped: " << children.status().message();
    return;
  }
  Result<std::string> latest = ResolveLatest(root_, env_);
  const std::string protect = latest.ok() ? *latest : final_dir_;
  std::vector<std::pair<int64_t, std::string>> complete;  // (step, directory name)
  for (const std::string& c : *children) {
    const std::string path = JoinPath(root_, c);
    Status s;
    if (std::optional<int64_t> st = ParseStepDirName(c)) {
      if (env_->IsDirectory(path)) complete.emplace_back(*st, c);
    } else if (ParseStepDirNameWithSuffix(c, ".trash")) {
      s = RemoveDirRecursive(env_, path);
    } else if (std::optional<int64_t> t = ParseStepDirNameWithSuffix(c, ".tmp"); t && *t < step_) {
      s = RemoveDirRecursive(env_, path);  // a save that crashed before committing
    }
    if (!s.ok()) {
      LS_LOG(WARN) << "checkpoint pruning: " << s.message();
    }
  }
  if (keep_ <= 0) return;
  std::sort(complete.begin(), complete.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = static_cast<size_t>(keep_); i < complete.size(); ++i) {
    if (JoinPath(root_, complete[i].second) == protect) continue;
    Status s = Discard(env_, root_, complete[i].second);
    if (!s.ok()) {
      LS_LOG(WARN) << "checkpoint pruning: " << s.message();
    }
  }
}

}  // namespace lockstep::checkpoint
