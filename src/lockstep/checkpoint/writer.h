// CheckpointWriter: writes one checkpoint collectively. Every rank writes its own shard file
// into <root>/step-XXXXXXXX.tmp/; then, after a barrier the caller provides, rank 0 commits:
// manifest, fsyncs, rename to step-XXXXXXXX, `latest` replaced atomically, old ones pruned.
//
//   all ranks:  LS_ASSIGN_OR_RETURN(auto w, CheckpointWriter::Begin(root, step, rank, world));
//               Status s = w.WriteShard(my_pieces);
//               barrier that also agrees whether every rank's s was ok
//   rank 0:     if all ok: w.Commit({{"config_hash", ...}, {"layout", ...}, ...});
//
// Begin is idempotent and deletes nothing, so ranks need no barrier between Begin and
// WriteShard: each rank (re)creates the directories and truncates only its own file. Leftovers
// of a crashed attempt in the same .tmp (files of ranks that no longer exist, an old
// manifest) are removed by Commit; stale .tmp directories of older steps are removed by the
// pruning at the end of Commit.
//
// Commit must be called only when every rank's WriteShard returned ok: it trusts the shard
// headers it finds (it checks their step, rank, world and that the pieces tile each tensor,
// but does not reread the data).
//
// A crash at any instant leaves `latest` naming a complete checkpoint (or absent if there was
// none): the new one becomes visible only through the rename of its directory, and `latest`
// only moves after that rename is durable.
//
// Thread-safety: a CheckpointWriter is a plain value; it may be moved to and used from any
// thread (e.g. a background saver writing from a staging copy), one thread at a time.
// WriteShard reads the ShardRef buffers only during the call and never modifies them; the
// buffers must not change while it runs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/checkpoint/dtype.h"
#include "lockstep/checkpoint/env.h"
#include "lockstep/core/result.h"

namespace lockstep::checkpoint {

// Elements [begin, end) of the row-major flattening of a tensor of global_shape, held by this
// rank at `data` ((end - begin) * DTypeSize(dtype) bytes, little-endian). A whole tensor is
// begin = 0, end = numel. A rank may pass several pieces of one tensor (e.g. a row-parallel
// slice is one piece per row); over all ranks the non-empty pieces must tile [0, numel).
struct ShardRef {
  std::string name;                   // 1..1024 bytes, no control characters
  std::vector<int64_t> global_shape;  // {} is a scalar (numel 1)
  DType dtype = DType::kF32;
  const void* data = nullptr;  // not owned
  int64_t begin = 0, end = 0;
};

struct WriterOptions {
  Env* env = nullptr;  // nullptr: Env::Default(); not owned, must outlive the writer
  // Commit keeps the newest `keep` complete checkpoints by step (0: keep all). The one
  // `latest` names is never deleted.
  int keep = 0;
};

// Keys Commit's `extra` should use (the caller decides what goes in; see
// docs/checkpoint-format.md): "config_hash" (string; Checkpoint::CheckConfigHash reads it),
// "layout" (object, e.g. {"dp":2,"tp":1,"pp":1,"zero":0}), "rng", "loader",
// "optimizer_step".
class CheckpointWriter {
 public:
  // root: <out>/checkpoints (created if missing). InvalidArgument for step < 0 or a rank
  // outside [0, world).
  static Result<CheckpointWriter> Begin(const std::string& root, int64_t step, int rank, int world,
                                        WriterOptions options = {});

  // Writes rank-RRRRR.safetensors (replacing an earlier one of this rank), fsyncs it and the
  // directory. InvalidArgument for an invalid piece (bad name, range, null data, key clash).
  Status WriteShard(const std::vector<ShardRef>& pieces);

  // Rank 0 only, after every rank's WriteShard succeeded. `extra` must be a JSON object (or
  // null). InvalidArgument when the pieces of some tensor do not tile it or disagree on dtype
  // or shape; IoError when the file system fails. On error `latest` is untouched unless the
  // error comes after it was replaced (then it names this checkpoint).
  Status Commit(const nlohmann::json& extra);

  int64_t step() const { return step_; }
  const std::string& tmp_dir() const { return tmp_dir_; }
  const std::string& final_dir() const { return final_dir_; }

 private:
  CheckpointWriter() = default;
  Status PublishLatest();
  void Prune();

  Env* env_ = nullptr;
  std::string root_, tmp_dir_, final_dir_;
  int64_t step_ = 0;
  int rank_ = 0, world_ = 1, keep_ = 0;
  bool committed_ = false;
};

}  // namespace lockstep::checkpoint
