#include "checkpoint/checkpoint_test_util.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <barrier>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "lockstep/checkpoint/reader.h"
#include "lockstep/core/hash.h"

namespace lockstep::checkpoint::testing {

int64_t TestTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

TestTensor MakeTensor(const std::string& name, DType dtype, std::vector<int64_t> shape, uint64_t seed) {
  TestTensor t{name, dtype, std::move(shape), {}};
  t.bytes.resize(static_cast<size_t>(t.numel() * t.esize()));
  uint64_t x = Xxh64(name.data(), name.size(), seed);
  for (size_t i = 0; i < t.bytes.size(); ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    t.bytes[i] = static_cast<char>(x >> 56);
  }
  return t;
}

std::vector<TestTensor> MakeModel(uint64_t seed) {
  return {MakeTensor("wte", DType::kF32, {37, 16}, seed),      MakeTensor("h.0.attn.w", DType::kBF16, {16, 48}, seed),
          MakeTensor("h.0.ln.b", DType::kF32, {16}, seed),     MakeTensor("opt.step", DType::kI64, {}, seed),
          MakeTensor("loader.perm", DType::kI32, {101}, seed), MakeTensor("mask", DType::kU8, {3, 5, 7}, seed),
          MakeTensor("empty", DType::kF32, {0, 4}, seed)};
}

std::pair<int64_t, int64_t> SplitRange(int64_t numel, int rank, int world) {
  // Shares proportional to 1, 2, ..., world: uneven, and small tensors leave early ranks empty.
  int64_t total = static_cast<int64_t>(world) * (world + 1) / 2;
  int64_t before = static_cast<int64_t>(rank) * (rank + 1) / 2;
  int64_t upto = static_cast<int64_t>(rank + 1) * (rank + 2) / 2;
  return {numel * before / total, numel * upto / total};
}

std::vector<ShardRef> SplitPieces(const std::vector<TestTensor>& model, int rank, int world) {
  std::vector<ShardRef> out;
  for (const TestTensor& t : model) {
    auto [b, e] = SplitRange(t.numel(), rank, world);
    out.push_back(ShardRef{t.name, t.shape, t.dtype, t.bytes.data() + b * t.esize(), b, e});
  }
  return out;
}

Status WriteCheckpoint(const std::string& root, int64_t step, const std::vector<TestTensor>& model, int world,
                       WriterOptions options, nlohmann::json extra) {
  if (extra.is_null()) extra = {{"config_hash", "cfg-1"}, {"step", step}};
  std::vector<Status> status(world);
  std::barrier sync(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      Result<CheckpointWriter> w = CheckpointWriter::Begin(root, step, r, world, options);
      Status s = w.ok() ? w->WriteShard(SplitPieces(model, r, world)) : w.status();
      status[r] = s;
      sync.arrive_and_wait();
      if (r != 0) return;
      for (const Status& other : status) {
        if (!other.ok()) return;
      }
      status[0] = w->Commit(extra);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const Status& s : status) {
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

Status ExpectModel(const std::string& dir, const std::vector<TestTensor>& model, Env* env) {
  LS_ASSIGN_OR_RETURN(Checkpoint c, Checkpoint::Open(dir, env));
  if (c.tensors().size() != model.size()) return Status::Internal("tensor count differs");
  for (const TestTensor& t : model) {
    const TensorInfo* info = c.Find(t.name);
    if (info == nullptr || info->dtype != t.dtype || info->shape != t.shape) {
      return Status::Internal("tensor " + t.name + " missing or with another dtype/shape");
    }
    std::vector<char> got(t.bytes.size() + 1, '\x5a');
    LS_RETURN_IF_ERROR(c.Read(t.name, 0, t.numel(), got.data()));
    if (!t.bytes.empty() && std::memcmp(got.data(), t.bytes.data(), t.bytes.size()) != 0) {
      return Status::Internal("tensor " + t.name + " differs");
    }
    if (got.back() != '\x5a') return Status::Internal("tensor " + t.name + ": Read wrote past the end");
  }
  return Status::Ok();
}

uint64_t FileSize(const std::string& path) { return std::filesystem::file_size(path); }

void FlipByte(const std::string& path, uint64_t offset, unsigned char mask) {
  int fd = ::open(path.c_str(), O_RDWR);
  if (fd < 0) return;
  char c = 0;
  if (::pread(fd, &c, 1, static_cast<off_t>(offset)) == 1) {
    c = static_cast<char>(c ^ mask);
    (void)!::pwrite(fd, &c, 1, static_cast<off_t>(offset));
  }
  ::close(fd);
}

void Truncate(const std::string& path, uint64_t size) { std::filesystem::resize_file(path, size); }

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
}

void CopyTree(const std::string& from, const std::string& to) {
  std::filesystem::copy(from, to, std::filesystem::copy_options::recursive);
}

nlohmann::json LoadManifestJson(const std::string& dir) {
  nlohmann::json j = nlohmann::json::parse(ReadAll(dir + "/manifest.json"));
  j.erase("manifest_xxh64");
  return j;
}

void StoreManifestJson(const std::string& dir, const nlohmann::json& body) {
  // Same layout as SerializeManifest: checksum field first, hashed as 16 zeros.
  const std::string prefix = "{\"manifest_xxh64\": \"";
  std::string dumped = body.dump(1);
  std::string text = prefix + std::string(16, '0') + "\",\n" + dumped.substr(dumped.size() > 2 ? 2 : 1) + "\n";
  if (body.empty()) text = prefix + std::string(16, '0') + "\"}\n";
  std::string hex = HexU64(Xxh64(text.data(), text.size()));
  std::copy(hex.begin(), hex.end(), text.begin() + prefix.size());
  WriteAll(dir + "/manifest.json", text);
}

std::string ShardHeaderText(const std::string& path) {
  std::string all = ReadAll(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(all[i]);
  std::string text = all.substr(8, n);
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

void ReplaceShardHeader(const std::string& dir, const std::string& file, std::string header_text) {
  const std::string path = dir + "/" + file;
  std::string all = ReadAll(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(all[i]);
  std::string data = all.substr(8 + n);
  if (header_text.size() < n) header_text.resize(n, ' ');
  std::string out(8, '\0');
  uint64_t m = header_text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((m >> (8 * i)) & 0xff);
  out += header_text;
  uint64_t header_hash = Xxh64(out.data(), out.size());
  out += data;
  WriteAll(path, out);
  nlohmann::json j = LoadManifestJson(dir);
  for (auto& f : j["files"]) {
    if (f["name"] == file) {
      f["bytes"] = out.size();
      f["header_xxh64"] = HexU64(header_hash);
    }
  }
  StoreManifestJson(dir, j);
}

}  // namespace lockstep::checkpoint::testing
