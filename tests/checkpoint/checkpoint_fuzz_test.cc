// Bounded random fuzzing of the readers: thousands of mutated manifests and shard headers
// (byte flips, truncations, insertions, JSON values of wrong types, huge numbers), with the
// checksums recomputed so the mutations reach the parsers and cross-checks. The reader must
// never crash (ASan/UBSan builds check that) and must never return data that differs from
// what was written: whenever Open, Verify and Read all succeed, the bytes must be the originals.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "checkpoint/checkpoint_test_util.h"
#include "lockstep/checkpoint/manifest.h"
#include "lockstep/checkpoint/reader.h"
#include "lockstep/checkpoint/safetensors.h"
#include "lockstep/core/hash.h"

namespace lockstep::checkpoint {
namespace {

using namespace testing;
using nlohmann::json;

class Fuzz : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = MakeModel(31);
    ASSERT_TRUE(WriteCheckpoint(tmp_.path(), 4, model_, 2).ok());
    dir_ = tmp_.path() + "/step-00000004";
    manifest_ = ReadAll(dir_ + "/manifest.json");
    manifest_json_ = LoadManifestJson(dir_);
    for (int r = 0; r < 2; ++r) {
      const std::string path = dir_ + "/" + File(r);
      shards_.push_back(ReadAll(path));
      headers_.push_back(ShardHeaderText(path));
    }
  }
  static std::string File(int r) { return "rank-0000" + std::to_string(r) + ".safetensors"; }
  void Restore(int shard = -1) {
    WriteAll(dir_ + "/manifest.json", manifest_);
    if (shard >= 0) WriteAll(dir_ + "/" + File(shard), shards_[shard]);
  }
  // Writes shard r with its JSON header replaced by `header` (padded to the old length when
  // shorter) and a manifest whose size and header_xxh64 for it match, so the mutation gets
  // past the checksums and reaches the parser and the cross-checks.
  void WriteShardWithHeader(int r, std::string header) {
    const std::string& all = shards_[r];
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(all[i]);
    if (header.size() < n) header.resize(n, ' ');
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((uint64_t{header.size()} >> (8 * i)) & 0xff);
    out += header;
    const uint64_t hash = Xxh64(out.data(), out.size());
    out.append(all, 8 + n, std::string::npos);
    WriteAll(dir_ + "/" + File(r), out);
    json j = manifest_json_;
    for (auto& f : j["files"]) {
      if (f["name"] == File(r)) {
        f["bytes"] = out.size();
        f["header_xxh64"] = HexU64(hash);
      }
    }
    StoreManifestJson(dir_, j);
  }
  // Opens the (mutated) checkpoint; if everything succeeds, the data must be the original.
  // Returns whether it was accepted.
  bool OpenAndCheck(const std::string& what) {
    Result<Checkpoint> c = Checkpoint::Open(dir_);
    if (!c.ok()) {
      EXPECT_EQ(c.status().message().find('\n'), std::string::npos) << what;
      return false;
    }
    if (!c->Verify().ok()) return false;
    bool all_read = true;
    for (const TensorInfo& t : c->tensors()) {
      std::vector<char> buf(static_cast<size_t>(t.bytes()));
      if (!c->Read(t.name, 0, t.numel, buf.data()).ok()) {
        all_read = false;
        continue;
      }
      // Accepted data must be exactly what was written under that name.
      const TestTensor* orig = nullptr;
      for (const TestTensor& m : model_) {
        if (m.name == t.name) orig = &m;
      }
      EXPECT_TRUE(orig != nullptr && orig->dtype == t.dtype && orig->shape == t.shape && orig->bytes == buf)
          << what << ": accepted wrong data for " << t.name;
    }
    if (all_read) {
      EXPECT_EQ(c->tensors().size(), model_.size()) << what << ": accepted with tensors missing";
    }
    return all_read;
  }

  TempDir tmp_;
  std::vector<TestTensor> model_;
  std::string dir_, manifest_;
  json manifest_json_;
  std::vector<std::string> shards_, headers_;
};

json RandomValue(std::mt19937_64& rng) {
  switch (rng() % 14) {
    case 0:
      return nullptr;
    case 1:
      return rng() % 2 == 0;
    case 2:
      return -static_cast<int64_t>(rng() % 1000) - 1;
    case 3:
      return static_cast<uint64_t>(rng());  // huge unsigned
    case 4:
      return std::numeric_limits<int64_t>::max();
    case 5:
      return static_cast<double>(rng() % 100) + 0.5;
    case 6:
      return 1e300;
    case 7:
      return "";
    case 8:
      return std::string(rng() % 300, 'x');
    case 9:
      return json::array();
    case 10:
      return json::object();
    case 11:
      return json::array({rng() % 10, static_cast<uint64_t>(rng())});
    case 12:
      return static_cast<int64_t>(rng() % 5000);  // plausible small number
    default:
      return "F32";
  }
}

// Replaces a random node (not the root) of j with a random value, or deletes it.
void MutateJson(json& j, std::mt19937_64& rng) {
  json* node = &j;
  for (int depth = 0; depth < 6; ++depth) {
    if (!(node->is_object() || node->is_array()) || node->empty()) break;
    size_t i = rng() % node->size();
    json* child = nullptr;
    if (node->is_object()) {
      auto it = node->begin();
      std::advance(it, static_cast<long>(i));
      child = &it.value();
    } else {
      child = &(*node)[i];
    }
    bool stop = !(child->is_object() || child->is_array()) || rng() % 3 == 0;
    if (stop) {
      if (rng() % 6 == 0) {
        if (node->is_object())
          node->erase(std::next(node->begin(), static_cast<long>(i)));
        else
          node->erase(i);
      } else {
        *child = RandomValue(rng);
      }
      return;
    }
    node = child;
  }
}

std::string MutateBytes(std::string s, std::mt19937_64& rng) {
  int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits && !s.empty(); ++e) {
    size_t at = rng() % s.size();
    switch (rng() % 5) {
      case 0:
        s[at] = static_cast<char>(s[at] ^ (1 << (rng() % 8)));
        break;
      case 1:
        s[at] = static_cast<char>(rng());
        break;
      case 2:
        s.resize(at);
        break;
      case 3:
        s.insert(at, 1, "{}[]\",:0-e9 \\"[rng() % 14]);
        break;
      default:
        s.erase(at, 1 + rng() % 8);
        break;
    }
  }
  return s;
}

TEST_F(Fuzz, MutatedManifests) {
  std::mt19937_64 rng(1234);
  int accepted = 0;
  for (int i = 0; i < 1500; ++i) {
    if (i % 2 == 0) {
      json j = manifest_json_;
      MutateJson(j, rng);
      StoreManifestJson(dir_, j);
    } else {  // raw bytes, checksum field recomputed when it is still there
      std::string text = MutateBytes(manifest_, rng);
      Result<json> parsed = [&]() -> Result<json> {
        try {
          json j = json::parse(text);
          if (!j.is_object()) return Status::Corruption("");
          j.erase("manifest_xxh64");
          return j;
        } catch (const json::exception&) {
          return Status::Corruption("");
        }
      }();
      if (parsed.ok() && rng() % 2 == 0)
        StoreManifestJson(dir_, *parsed);
      else
        WriteAll(dir_ + "/manifest.json", text);
    }
    accepted += OpenAndCheck("manifest mutation " + std::to_string(i));
  }
  Restore();
  EXPECT_LT(accepted, 1500);  // most mutations must be rejected
}

TEST_F(Fuzz, MutatedShardHeaderJson) {
  std::mt19937_64 rng(99);
  int accepted = 0;
  for (int i = 0; i < 1000; ++i) {
    json h = json::parse(headers_[i % 2]);
    MutateJson(h, rng);
    WriteShardWithHeader(i % 2, h.dump());
    accepted += OpenAndCheck("header JSON mutation " + std::to_string(i));
    Restore(i % 2);
  }
  EXPECT_LT(accepted, 1000);
}

TEST_F(Fuzz, MutatedShardHeaderBytes) {
  std::mt19937_64 rng(98);
  int accepted = 0;
  for (int i = 0; i < 1000; ++i) {
    WriteShardWithHeader(i % 2, MutateBytes(headers_[i % 2], rng));
    accepted += OpenAndCheck("header byte mutation " + std::to_string(i));
    Restore(i % 2);
  }
  EXPECT_LT(accepted, 1000);
}

// Damaged length prefixes and data sizes: huge, zero, past the end.
TEST_F(Fuzz, HugeLengthsAndOffsets) {
  const std::string path = dir_ + "/rank-00001.safetensors";
  for (uint64_t n :
       std::vector<uint64_t>{0, 1, 7, 1ull << 40, ~0ull, ~0ull >> 1, (100ull << 20) + 1, shards_[1].size()}) {
    std::string s = shards_[1];
    for (int b = 0; b < 8; ++b) s[b] = static_cast<char>((n >> (8 * b)) & 0xff);
    WriteAll(path, s);
    EXPECT_FALSE(OpenAndCheck("length " + std::to_string(n)));
    Restore(1);
  }
  json j = manifest_json_;
  for (json bad : {json(~0ull), json(-1), json(1ull << 62), json(9007199254740993.0)}) {
    for (const char* field : {"offset", "bytes", "begin", "end"}) {
      json m = j;
      m["tensors"][0]["shards"][0][field] = bad;
      StoreManifestJson(dir_, m);
      EXPECT_FALSE(OpenAndCheck(std::string(field) + " = " + bad.dump()));
    }
  }
  Restore();
  EXPECT_TRUE(OpenAndCheck("restored"));
}

// The parsers on their own, fed random bytes and deep nesting.
TEST_F(Fuzz, ParsersOnRandomInput) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string s(rng() % 200, '\0');
    for (char& c : s) c = "{}[]\":,0123456789.-eE tnrufalsF32__metadata__"[rng() % 46];
    EXPECT_FALSE(ParseManifest(s).ok());
    (void)ParseShardHeader(s);
  }
  EXPECT_FALSE(ParseShardHeader(std::string(100000, '[')).ok());
  EXPECT_FALSE(ParseShardHeader(std::string(100000, '[') + std::string(100000, ']')).ok());
  EXPECT_FALSE(ParseManifest("{\"manifest_xxh64\": \"0000000000000000\"," + std::string(100000, '[')).ok());
}

}  // namespace
}  // namespace lockstep::checkpoint
