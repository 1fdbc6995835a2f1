// libFuzzer target for the checkpoint parsers (not built by CMake; see README.md here).
// The first input byte picks the parser, the rest is its input:
//   0: ParseManifest (with the manifest_xxh64 prefix recomputed, so the fuzzer gets past it)
//   1: ParseShardHeader
//   2: ReadShardHeader over an in-memory "file" (length prefix, header, data)
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "lockstep/checkpoint/env.h"
#include "lockstep/checkpoint/manifest.h"
#include "lockstep/checkpoint/safetensors.h"
#include "lockstep/core/hash.h"

namespace {

using namespace lockstep;
using namespace lockstep::checkpoint;

class MemoryFile final : public RandomAccessFile {
 public:
  explicit MemoryFile(std::string data) : data_(std::move(data)) {}
  Result<size_t> Read(uint64_t offset, size_t n, void* out) const override {
    if (offset >= data_.size()) return size_t{0};
    size_t got = std::min<uint64_t>(n, data_.size() - offset);
    std::memcpy(out, data_.data() + offset, got);
    return got;
  }

 private:
  std::string data_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0: {
      const std::string prefix = "{\"manifest_xxh64\": \"";
      std::string text = prefix + std::string(16, '0') + "\"," + input;
      std::string hex = HexU64(Xxh64(text.data(), text.size()));
      std::memcpy(text.data() + prefix.size(), hex.data(), 16);
      Result<Manifest> m = ParseManifest(text);
      if (m.ok()) (void)SerializeManifest(*m);
      break;
    }
    case 1:
      (void)ParseShardHeader(input);
      break;
    default: {
      MemoryFile file(input);
      (void)ReadShardHeader(file, "fuzz.safetensors", input.size());
      break;
    }
  }
  return 0;
}
