// xxh64 over bytes, streaming or one-shot (libxxhash). Used for checkpoint checksums and
// the weights_xxh64 fingerprint of a finished run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace lockstep {

uint64_t Xxh64(const void* data, size_t size, uint64_t seed = 0);
// 16 lowercase hex digits.
std::string HexU64(uint64_t v);

class Xxh64Stream {
 public:
  explicit Xxh64Stream(uint64_t seed = 0);
  ~Xxh64Stream();
  Xxh64Stream(const Xxh64Stream&) = delete;
  Xxh64Stream& operator=(const Xxh64Stream&) = delete;
  void Update(const void* data, size_t size);
  uint64_t Digest() const;

 private:
  void* state_;
};

}  // namespace lockstep
