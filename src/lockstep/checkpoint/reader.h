// Checkpoint: a read-only view of one checkpoint directory.
//
// Open() reads manifest.json and the header of every shard file (never tensor data) and
// cross-checks them, so a torn, truncated, foreign-format or tampered checkpoint fails there
// with one line naming the file (and tensor). Tensor data is checked against its xxh64 by
// Verify() (everything) or by Read() (each piece it touches, once per piece per Checkpoint
// object).
//
// Read() serves any element range of any tensor from whichever shards hold it, so a rank of
// any layout loads its slice of a checkpoint written by any other layout (resharding).
//
// Thread-safety: after Open, every const method may be called from several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/checkpoint/env.h"
#include "lockstep/checkpoint/manifest.h"
#include "lockstep/core/result.h"

namespace lockstep::checkpoint {

class Checkpoint {
 public:
  // dir: a step-XXXXXXXX directory. NotFound when it or a file it lists is missing;
  // Corruption for anything malformed or inconsistent. env: nullptr for Env::Default(); not
  // owned, must outlive the Checkpoint.
  static Result<Checkpoint> Open(const std::string& dir, Env* env = nullptr);

  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;
  ~Checkpoint();

  const std::string& dir() const;
  int64_t step() const;
  int64_t world() const;  // number of ranks that wrote it
  int64_t format_version() const;
  // The caller's state saved with Commit(extra): config_hash, layout, rng, data_loader, ...
  const nlohmann::json& extra() const;
  const std::vector<TensorInfo>& tensors() const;  // sorted by name
  const std::vector<FileInfo>& files() const;
  const TensorInfo* Find(std::string_view name) const;  // nullptr when absent

  // Reads every piece and checks its xxh64. On failure: the first bad piece's one-line error,
  // with " (and N more bad pieces)" when there are others.
  Status Verify() const;
  // The checksum status of each shard of tensors()[tensor_index], in the order of its shards.
  std::vector<Status> CheckShards(size_t tensor_index) const;

  // Copies elements [begin, end) of the flattened tensor `name` into out (room for
  // (end - begin) * DTypeSize(dtype) bytes). Reads only the needed bytes of each covering
  // shard, except that the first touch of a shard reads all of it to verify its checksum.
  // NotFound for an unknown tensor, InvalidArgument for a bad range, Corruption for a
  // checksum mismatch or short read; on error the contents of out are unspecified.
  Status Read(const std::string& name, int64_t begin, int64_t end, void* out) const;

  // Compares extra()["config_hash"] with the hash of the running config: InvalidArgument
  // "foreign checkpoint ..." on a mismatch or when the checkpoint has none.
  Status CheckConfigHash(const std::string& expected) const;

  struct Impl;  // opaque (reader_impl.h)

 private:
  explicit Checkpoint(std::unique_ptr<Impl> impl);
  Status ReadPiece(size_t t, size_t s, int64_t lo, int64_t hi, char* dst) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep::checkpoint
