// Damaged checkpoints: truncation and byte flips in every shard (data and header) and in the
// manifest, missing files, wrong versions, dtypes and shapes, foreign configs. Every one is
// rejected with a single line naming the file (and the tensor where there is one).
#include <gtest/gtest.h>

#include <filesystem>

#include "checkpoint/checkpoint_test_util.h"
#include "lockstep/checkpoint/reader.h"
#include "lockstep/checkpoint/resolve.h"

namespace lockstep::checkpoint {
namespace {

using namespace testing;

class Corruption : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = MakeModel(21);
    ASSERT_TRUE(WriteCheckpoint(tmp_.path(), 8, model_, 3).ok());
    dir_ = tmp_.path() + "/step-00000008";
    Result<Checkpoint> c = Checkpoint::Open(dir_);
    ASSERT_TRUE(c.ok());
    tensors_ = c->tensors();
  }
  // Opens, then verifies: the first failure, or ok.
  Status OpenAndVerify() {
    Result<Checkpoint> c = Checkpoint::Open(dir_);
    if (!c.ok()) return c.status();
    return c->Verify();
  }
  // The tensor whose data holds byte `offset` of `file` ("" in a header).
  std::string TensorAt(const std::string& file, uint64_t offset) {
    for (const TensorInfo& t : tensors_) {
      for (const ShardInfo& s : t.shards) {
        if (s.file == file && offset >= s.offset && offset < s.offset + s.bytes) return t.name;
      }
    }
    return "";
  }
  uint64_t DataStart(const std::string& file) {
    uint64_t start = ~0ull;
    for (const TensorInfo& t : tensors_) {
      for (const ShardInfo& s : t.shards) {
        if (s.file == file && s.bytes > 0) start = std::min(start, s.offset);
      }
    }
    return start;
  }
  static void ExpectOneLine(const Status& s) { EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message(); }

  TempDir tmp_;
  std::vector<TestTensor> model_;
  std::string dir_;
  std::vector<TensorInfo> tensors_;
};

const char* kFiles[] = {"rank-00000.safetensors", "rank-00001.safetensors", "rank-00002.safetensors"};

TEST_F(Corruption, TruncatedShardFiles) {
  for (const char* file : kFiles) {
    const std::string path = dir_ + "/" + file;
    const std::string original = ReadAll(path);
    const uint64_t size = original.size();
    for (uint64_t cut : {uint64_t{0}, uint64_t{3}, uint64_t{8}, uint64_t{20}, DataStart(file) - 1, DataStart(file),
                         (DataStart(file) + size) / 2, size - 1}) {
      Truncate(path, cut);
      Result<Checkpoint> c = Checkpoint::Open(dir_);
      ASSERT_FALSE(c.ok()) << file << " cut at " << cut;
      EXPECT_EQ(c.status().code(), StatusCode::kCorruption);
      EXPECT_NE(c.status().message().find(path + ": truncated: " + std::to_string(cut) + " bytes"), std::string::npos)
          << c.status().message();
      ExpectOneLine(c.status());
      WriteAll(path, original);
    }
    WriteAll(path, original + "x");  // one byte too many is refused too
    Result<Checkpoint> c = Checkpoint::Open(dir_);
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("size mismatch"), std::string::npos) << c.status().message();
    WriteAll(path, original);
  }
  EXPECT_TRUE(OpenAndVerify().ok());
}

TEST_F(Corruption, TruncatedManifest) {
  const std::string path = dir_ + "/manifest.json";
  const std::string original = ReadAll(path);
  for (uint64_t cut = 0; cut < original.size(); cut += 1 + cut / 3) {
    Truncate(path, cut);
    Result<Checkpoint> c = Checkpoint::Open(dir_);
    ASSERT_FALSE(c.ok()) << "cut at " << cut;
    EXPECT_EQ(c.status().code(), StatusCode::kCorruption);
    EXPECT_EQ(c.status().message().rfind(path + ": ", 0), 0u) << c.status().message();
    ExpectOneLine(c.status());
    WriteAll(path, original);
  }
}

// Every byte of every shard header and of the manifest: Open fails, naming the file. One test
// per file, so that each stays short under sanitizers.
class FlippedBytes : public Corruption, public ::testing::WithParamInterface<const char*> {};

TEST_P(FlippedBytes, HeaderOrManifestByteDetected) {
  const std::string file = GetParam();
  const bool manifest = file == "manifest.json";
  const std::string path = dir_ + "/" + file;
  const uint64_t end = manifest ? FileSize(path) : DataStart(file);
  // Shard headers: every byte. The manifest (one checksum over all of it): its checksum
  // prefix, then every 3rd byte.
  for (uint64_t off = 0; off < end; off += (manifest && off >= 40) ? 3 : 1) {
    for (unsigned char mask : {0x01, 0x80}) {
      if (mask == 0x80 && off % 7 != 0) continue;  // the low bit of every byte, the high bit of some
      FlipByte(path, off, mask);
      Result<Checkpoint> c = Checkpoint::Open(dir_);
      FlipByte(path, off, mask);
      ASSERT_FALSE(c.ok()) << file << " byte " << off << " ^ " << int(mask);
      ASSERT_EQ(c.status().message().rfind(path + ": ", 0), 0u) << c.status().message();
      ExpectOneLine(c.status());
    }
  }
  EXPECT_TRUE(OpenAndVerify().ok());
}

INSTANTIATE_TEST_SUITE_P(Files, FlippedBytes,
                         ::testing::Values("manifest.json", "rank-00000.safetensors", "rank-00001.safetensors",
                                           "rank-00002.safetensors"));

// Data bytes: Open succeeds (it reads headers only); Verify and Read name the file and tensor.
TEST_F(Corruption, FlippedDataBytes) {
  for (const char* file : kFiles) {
    const std::string path = dir_ + "/" + file;
    const uint64_t size = FileSize(path);
    for (uint64_t off = DataStart(file); off < size; off += 23) {
      const std::string tensor = TensorAt(file, off);
      ASSERT_FALSE(tensor.empty());
      FlipByte(path, off);
      Result<Checkpoint> c = Checkpoint::Open(dir_);
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      Status v = c->Verify();
      const std::string expect = path + ": tensor '" + tensor + "': checksum mismatch";
      EXPECT_EQ(v.code(), StatusCode::kCorruption);
      EXPECT_EQ(v.message().rfind(expect, 0), 0u) << v.message();
      ExpectOneLine(v);
      Result<Checkpoint> fresh = Checkpoint::Open(dir_);
      const TensorInfo* t = fresh->Find(tensor);
      std::vector<char> buf(t->bytes());
      Status r = fresh->Read(tensor, 0, t->numel, buf.data());
      EXPECT_EQ(r.message().rfind(expect, 0), 0u) << r.message();
      FlipByte(path, off);
    }
  }
  EXPECT_TRUE(OpenAndVerify().ok());
}

TEST_F(Corruption, MissingFiles) {
  for (const char* file : {"manifest.json", "rank-00001.safetensors"}) {
    const std::string path = dir_ + "/" + file;
    const std::string original = ReadAll(path);
    std::filesystem::remove(path);
    Result<Checkpoint> c = Checkpoint::Open(dir_);
    EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
    EXPECT_EQ(c.status().message(), path + ": missing file");
    WriteAll(path, original);
  }
  EXPECT_EQ(Checkpoint::Open(tmp_.path() + "/step-00000099").status().code(), StatusCode::kNotFound);
}

// Semantically wrong but well-formed files (checksums recomputed so only the content is wrong).
TEST_F(Corruption, WrongVersionDtypeShapeRange) {
  const std::string mpath = dir_ + "/manifest.json";
  const std::string original_manifest = ReadAll(mpath);
  auto open_error = [&] { return Checkpoint::Open(dir_).status().message(); };

  nlohmann::json j = LoadManifestJson(dir_);
  j["format_version"] = 2;
  StoreManifestJson(dir_, j);
  EXPECT_EQ(open_error(), mpath + ": unsupported format_version 2 (this build reads 1)");

  j = LoadManifestJson(dir_);
  j["format_version"] = 1;
  for (auto& t : j["tensors"]) {
    if (t["name"] == "wte") t["shape"] = {16, 37};
  }
  StoreManifestJson(dir_, j);
  EXPECT_EQ(open_error(), dir_ +
                              "/rank-00000.safetensors: tensor 'wte': shape/range mismatch: header and manifest "
                              "disagree on shape of key 'wte'");

  for (auto& t : j["tensors"]) {
    if (t["name"] == "wte") {
      t["shape"] = {37, 16};
      t["dtype"] = "F64";
    }
  }
  StoreManifestJson(dir_, j);
  EXPECT_EQ(open_error(), mpath + ": tensor 'wte': unknown dtype 'F64'");
  WriteAll(mpath, original_manifest);

  // Shard header with an unknown dtype (same length, so only the name is wrong).
  const std::string file = "rank-00001.safetensors";
  std::string header = ShardHeaderText(dir_ + "/" + file);
  const std::string original_shard = ReadAll(dir_ + "/" + file);
  size_t at = header.find("\"F32\"");
  ASSERT_NE(at, std::string::npos);
  header.replace(at, 5, "\"F16\"");
  ReplaceShardHeader(dir_, file, header);
  EXPECT_NE(open_error().find(dir_ + "/" + file + ": tensor '"), std::string::npos) << open_error();
  EXPECT_NE(open_error().find("unknown dtype 'F16'"), std::string::npos) << open_error();
  WriteAll(mpath, original_manifest);
  WriteAll(dir_ + "/" + file, original_shard);

  // A range in the header that differs from the manifest.
  header = ShardHeaderText(dir_ + "/" + file);
  nlohmann::json h = nlohmann::json::parse(header);
  std::string range = h["__metadata__"]["wte:range"];
  h["__metadata__"]["wte:range"] = "0," + range.substr(range.find(',') + 1);
  ReplaceShardHeader(dir_, file, h.dump());
  EXPECT_NE(open_error().find(dir_ + "/" + file + ": tensor 'wte': shape/range mismatch"), std::string::npos)
      << open_error();
  WriteAll(mpath, original_manifest);
  WriteAll(dir_ + "/" + file, original_shard);

  // Manifest ranges that no longer tile the tensor.
  j = LoadManifestJson(dir_);
  for (auto& t : j["tensors"]) {
    if (t["name"] == "wte") t["shards"].erase(1);
  }
  StoreManifestJson(dir_, j);
  EXPECT_NE(open_error().find("tensor 'wte': shards do not tile [0, 592): gap"), std::string::npos) << open_error();
  WriteAll(mpath, original_manifest);
  EXPECT_TRUE(OpenAndVerify().ok());
}

TEST_F(Corruption, ForeignConfig) {
  Result<Checkpoint> c = Checkpoint::Open(dir_);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->CheckConfigHash("cfg-1").ok());
  Status s = c->CheckConfigHash("cfg-2");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), dir_ +
                             "/manifest.json: foreign checkpoint: config hash mismatch: written by config 'cfg-1', "
                             "this run's config hashes to 'cfg-2'");
  TempDir other;
  ASSERT_TRUE(WriteCheckpoint(other.path(), 1, model_, 1, {}, nlohmann::json::object()).ok());
  Status none = Checkpoint::Open(other.path() + "/step-00000001")->CheckConfigHash("cfg-1");
  EXPECT_NE(none.message().find("foreign checkpoint: it records no config_hash"), std::string::npos);
}

TEST_F(Corruption, BadLatest) {
  WriteAll(tmp_.path() + "/latest", "../../etc\n");
  EXPECT_EQ(ResolveLatest(tmp_.path()).status().code(), StatusCode::kCorruption);
  WriteAll(tmp_.path() + "/latest", "step-00000009\n");
  EXPECT_EQ(ResolveLatest(tmp_.path()).status().message(),
            tmp_.path() + "/latest: names step-00000009, which does not exist");
  std::filesystem::remove(tmp_.path() + "/latest");
  EXPECT_EQ(ResolveLatest(tmp_.path()).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace lockstep::checkpoint
