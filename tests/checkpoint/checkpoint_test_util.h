// Shared helpers for the checkpoint tests: temporary directories, deterministic tensors,
// writing a checkpoint with N ranks (as threads), and byte-level damage to files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/checkpoint/dtype.h"
#include "lockstep/checkpoint/env.h"
#include "lockstep/checkpoint/writer.h"
#include "lockstep/core/status.h"
#include "temp_dir.h"

namespace lockstep::checkpoint::testing {

// An Env that forwards everything to another; tests override what they need.
class ForwardingEnv : public Env {
 public:
  explicit ForwardingEnv(Env* base = Env::Default()) : base_(base) {}
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& p) override {
    return base_->NewWritableFile(p);
  }
  Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& p) override {
    return base_->NewRandomAccessFile(p);
  }
  Result<uint64_t> GetFileSize(const std::string& p) override { return base_->GetFileSize(p); }
  bool FileExists(const std::string& p) override { return base_->FileExists(p); }
  bool IsDirectory(const std::string& p) override { return base_->IsDirectory(p); }
  Result<std::vector<std::string>> GetChildren(const std::string& d) override { return base_->GetChildren(d); }
  Status CreateDir(const std::string& d) override { return base_->CreateDir(d); }
  Status RemoveFile(const std::string& p) override { return base_->RemoveFile(p); }
  Status RemoveDir(const std::string& d) override { return base_->RemoveDir(d); }
  Status RenameFile(const std::string& a, const std::string& b) override { return base_->RenameFile(a, b); }
  Status ExchangePaths(const std::string& a, const std::string& b) override { return base_->ExchangePaths(a, b); }
  Status TruncateFile(const std::string& p, uint64_t n) override { return base_->TruncateFile(p, n); }
  Status SyncDir(const std::string& d) override { return base_->SyncDir(d); }

 protected:
  Env* base_;
};

using lockstep::testing::TempDir;  // tests/temp_dir.h

// A whole tensor with deterministic contents (a function of name and seed).
struct TestTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<char> bytes;  // numel * DTypeSize(dtype)
  int64_t numel() const;
  int64_t esize() const { return DTypeSize(dtype); }
};
TestTensor MakeTensor(const std::string& name, DType dtype, std::vector<int64_t> shape, uint64_t seed);
// A handful of tensors of every dtype, odd sizes, a scalar and an empty one.
std::vector<TestTensor> MakeModel(uint64_t seed);

// Pieces of rank r when every tensor is split into `world` uneven contiguous ranges
// (rank r gets a share proportional to r + 1; some ranks may get empty pieces).
std::vector<ShardRef> SplitPieces(const std::vector<TestTensor>& model, int rank, int world);
// The element range [begin, end) SplitPieces gives rank r.
std::pair<int64_t, int64_t> SplitRange(int64_t numel, int rank, int world);

// Writes `model` as a checkpoint of `world` ranks (each rank a thread, a barrier before rank 0
// commits), with extra {"config_hash": "cfg-1", "step": step}.
Status WriteCheckpoint(const std::string& root, int64_t step, const std::vector<TestTensor>& model, int world,
                       WriterOptions options = {}, nlohmann::json extra = nullptr);

// Reads every tensor of `model` back from dir in full and compares bytes; Status carries the
// first difference.
Status ExpectModel(const std::string& dir, const std::vector<TestTensor>& model, Env* env = nullptr);

// File damage.
uint64_t FileSize(const std::string& path);
void FlipByte(const std::string& path, uint64_t offset, unsigned char mask = 0x01);
void Truncate(const std::string& path, uint64_t size);
std::string ReadAll(const std::string& path);
void WriteAll(const std::string& path, const std::string& data);
void CopyTree(const std::string& from, const std::string& to);

// Manifest surgery for tests that must get past the manifest checksum: parse manifest.json
// into JSON (its manifest_xxh64 field removed), and write JSON back with a correct checksum.
nlohmann::json LoadManifestJson(const std::string& dir);
void StoreManifestJson(const std::string& dir, const nlohmann::json& body);
// Replaces the JSON header of dir/file with header_text (padded with spaces to keep its
// length when it is not longer), keeping the data, and updates the manifest's bytes and
// header_xxh64 for that file (checksum fixed), so only the header content is "wrong".
void ReplaceShardHeader(const std::string& dir, const std::string& file, std::string header_text);
// The JSON header text of dir/file (without the 8-byte length and without padding).
std::string ShardHeaderText(const std::string& path);

}  // namespace lockstep::checkpoint::testing
