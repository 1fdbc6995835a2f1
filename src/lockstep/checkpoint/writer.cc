// CheckpointWriter::Begin and WriteShard: one rank's shard file, written in large pieces
// straight from the caller's buffers and fsynced.
#include <algorithm>
#include <map>

#include "lockstep/checkpoint/json_util.h"
#include "lockstep/checkpoint/paths.h"
#include "lockstep/checkpoint/safetensors.h"
#include "lockstep/checkpoint/writer.h"
#include "lockstep/core/hash.h"

namespace lockstep::checkpoint {
namespace {

constexpr size_t kWriteChunk = 8u << 20;  // large enough to run at disk speed

Status CheckName(const std::string& name) {
  if (name.empty() || name.size() > 1024) {
    return Status::InvalidArgument("tensor name " + internal::Quote(name) + " must be 1..1024 bytes");
  }
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) {
      return Status::InvalidArgument("tensor name " + internal::Quote(name) + " contains a control character");
    }
  }
  return Status::Ok();
}

// Validates pieces and turns them into header entries (keys assigned, checksums computed).
Result<std::vector<ShardEntry>> MakeEntries(const std::vector<ShardRef>& pieces) {
  std::map<std::string, int> count;
  std::map<std::string, const ShardRef*> first;
  for (const ShardRef& p : pieces) {
    LS_RETURN_IF_ERROR(CheckName(p.name));
    const std::string where = "tensor " + internal::Quote(p.name);
    std::optional<int64_t> numel = internal::NumElements(p.global_shape, DTypeSize(p.dtype));
    if (!numel || p.global_shape.size() > 16) {
      return Status::InvalidArgument(where + ": invalid global shape " + internal::ShapeString(p.global_shape));
    }
    if (p.begin < 0 || p.begin > p.end || p.end > *numel) {
      return Status::InvalidArgument(where + ": range [" + std::to_string(p.begin) + ", " + std::to_string(p.end) +
                                     ") is outside [0, " + std::to_string(*numel) + ")");
    }
    if (p.data == nullptr && p.end > p.begin) return Status::InvalidArgument(where + ": data is null");
    auto [it, inserted] = first.emplace(p.name, &p);
    if (!inserted && (it->second->dtype != p.dtype || it->second->global_shape != p.global_shape)) {
      return Status::InvalidArgument(where + ": pieces disagree on dtype or global shape");
    }
    ++count[p.name];
  }
  std::map<std::string, int> ordinal;
  std::vector<ShardEntry> entries;
  for (const ShardRef& p : pieces) {
    ShardEntry e;
    e.tensor = p.name;
    e.key = count[p.name] == 1 ? p.name : p.name + "#" + std::to_string(ordinal[p.name]++);
    e.dtype = p.dtype;
    e.global_shape = p.global_shape;
    e.begin = p.begin;
    e.end = p.end;
    size_t bytes = static_cast<size_t>((p.end - p.begin) * DTypeSize(p.dtype));
    e.xxh64 = Xxh64(p.data, bytes);
    entries.push_back(std::move(e));
  }
  return entries;
}

}  // namespace

Result<CheckpointWriter> CheckpointWriter::Begin(const std::string& root, int64_t step, int rank, int world,
                                                 WriterOptions options) {
  if (step < 0) return Status::InvalidArgument("checkpoint step " + std::to_string(step) + " is negative");
  if (world < 1 || rank < 0 || rank >= world) {
    return Status::InvalidArgument("checkpoint rank " + std::to_string(rank) + " is outside world " +
                                   std::to_string(world));
  }
  if (options.keep < 0)
    return Status::InvalidArgument("checkpoint keep " + std::to_string(options.keep) + " is negative");
  CheckpointWriter w;
  w.env_ = options.env != nullptr ? options.env : Env::Default();
  w.root_ = root;
  w.step_ = step;
  w.rank_ = rank;
  w.world_ = world;
  w.keep_ = options.keep;
  w.final_dir_ = JoinPath(root, StepDirName(step));
  w.tmp_dir_ = w.final_dir_ + ".tmp";
  LS_RETURN_IF_ERROR(CreateDirs(w.env_, root));
  LS_RETURN_IF_ERROR(w.env_->CreateDir(w.tmp_dir_));
  return w;
}

Status CheckpointWriter::WriteShard(const std::vector<ShardRef>& pieces) {
  LS_ASSIGN_OR_RETURN(std::vector<ShardEntry> entries, MakeEntries(pieces));
  LS_ASSIGN_OR_RETURN(std::string header, EncodeShardHeader(step_, rank_, world_, &entries));
  const std::string path = JoinPath(tmp_dir_, ShardFileName(rank_));
  LS_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env_->NewWritableFile(path));
  LS_RETURN_IF_ERROR(file->Append(header.data(), header.size()));
  for (size_t i = 0; i < pieces.size(); ++i) {
    const char* p = static_cast<const char*>(pieces[i].data);
    size_t left = static_cast<size_t>(entries[i].data_end - entries[i].data_begin);
    while (left > 0) {
      size_t n = std::min(left, kWriteChunk);
      LS_RETURN_IF_ERROR(file->Append(p, n));
      p += n;
      left -= n;
    }
  }
  LS_RETURN_IF_ERROR(file->Sync());
  LS_RETURN_IF_ERROR(file->Close());
  return env_->SyncDir(tmp_dir_);
}

}  // namespace lockstep::checkpoint
