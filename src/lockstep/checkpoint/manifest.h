// Manifest: the parsed form of a checkpoint's manifest.json (docs/checkpoint-format.md).
// The text starts with its own xxh64 ("manifest_xxh64"), so a flipped byte anywhere in it,
// caller extras included, is detected.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/checkpoint/dtype.h"
#include "lockstep/core/result.h"

namespace lockstep::checkpoint {

// One stored piece of a tensor: elements [begin, end) of its row-major flattening, held in
// `file` under safetensors key `key`, at absolute byte `offset`, `bytes` long.
struct ShardInfo {
  std::string file;
  std::string key;
  int64_t begin = 0, end = 0;
  uint64_t offset = 0, bytes = 0;
  uint64_t xxh64 = 0;
};

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // global shape
  int64_t numel = 0;
  std::vector<ShardInfo> shards;  // sorted by begin; their non-empty ranges tile [0, numel)
  int64_t bytes() const { return numel * DTypeSize(dtype); }
};

struct FileInfo {
  std::string name;  // e.g. "rank-00002.safetensors", relative to the checkpoint dir
  int64_t rank = 0;
  uint64_t bytes = 0;         // exact file size
  uint64_t header_xxh64 = 0;  // of its first 8 + N bytes (length prefix and JSON header)
};

struct Manifest {
  int64_t format_version = 1;
  int64_t step = 0;
  int64_t world = 1;
  std::vector<FileInfo> files;                      // sorted by rank
  std::vector<TensorInfo> tensors;                  // sorted by name
  nlohmann::json extra = nlohmann::json::object();  // the caller's state (see writer.h)
};

// manifest.json text, checksum included. InvalidArgument when extra holds invalid UTF-8.
Result<std::string> SerializeManifest(const Manifest& m);
// Checks the checksum, version, every field's presence and type, value ranges, that each
// shard names a listed file and lies within it, and tiling. Errors are one line without the
// file name (the caller adds it).
Result<Manifest> ParseManifest(std::string_view text);
// Used by writer and reader: Corruption naming the tensor, the first gap or overlap and the
// files involved. Sorts t->shards by begin.
Status CheckTiling(TensorInfo* t);
// A plain file name: 1..255 bytes of [A-Za-z0-9._-], not "." or "..".
bool IsPlainFileName(std::string_view name);

}  // namespace lockstep::checkpoint
