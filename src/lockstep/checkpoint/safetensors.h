// Shard files: safetensors (an 8-byte little-endian header length N, N bytes of JSON header
// padded with spaces so the data starts 8-aligned, then the raw little-endian data) with
// lockstep's per-piece metadata in "__metadata__". docs/checkpoint-format.md specifies it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/checkpoint/dtype.h"
#include "lockstep/checkpoint/env.h"
#include "lockstep/core/result.h"

namespace lockstep::checkpoint {

inline constexpr int kFormatVersion = 1;
inline constexpr uint64_t kMaxShardHeaderBytes = 100ull << 20;  // as the safetensors library

// One piece in a shard file: elements [begin, end) of the row-major flattened global tensor.
struct ShardEntry {
  std::string key;     // safetensors tensor key (the tensor name, or name#i)
  std::string tensor;  // global tensor name
  DType dtype = DType::kF32;
  std::vector<int64_t> global_shape;
  int64_t begin = 0, end = 0;  // element range
  uint64_t data_begin = 0;     // data_offsets, relative to the data section
  uint64_t data_end = 0;
  uint64_t xxh64 = 0;  // of the piece's bytes
};

struct ShardHeader {
  int64_t step = 0, rank = 0, world = 0;
  uint64_t header_len = 0;          // N
  uint64_t data_bytes = 0;          // size of the data section
  uint64_t header_xxh64 = 0;        // of the first 8 + N bytes of the file
  std::vector<ShardEntry> entries;  // in data order
  uint64_t data_start() const { return 8 + header_len; }
  uint64_t file_size() const { return 8 + header_len + data_bytes; }
};

// The first 8 + N bytes of a shard file for these entries (data offsets are assigned
// sequentially in the given order; data_begin/data_end of the inputs are ignored).
// InvalidArgument when a key repeats or a name cannot be encoded.
Result<std::string> EncodeShardHeader(int64_t step, int64_t rank, int64_t world, std::vector<ShardEntry>* entries);

// Parses and validates the N header bytes (without the length prefix). Errors are one line,
// without the file name (the caller adds it); header_xxh64 is left 0.
Result<ShardHeader> ParseShardHeader(std::string_view header_json);

// Reads the length prefix and header of `path` (of file_size bytes), checks its xxh64 against
// *expected_header_xxh64 when given (before parsing, so a flipped byte reads as a checksum
// mismatch), parses it and checks the file size against it. Errors name the file.
Result<ShardHeader> ReadShardHeader(const RandomAccessFile& file, const std::string& path, uint64_t file_size,
                                    const uint64_t* expected_header_xxh64 = nullptr);

}  // namespace lockstep::checkpoint
