// bfloat16 <-> float32, the one implementation every layer uses (tensors, collectives,
// checkpoints). A bf16 is the upper 16 bits of an fp32; conversion to bf16 rounds to nearest,
// ties to even, and keeps NaN a (quiet) NaN instead of letting the rounding carry it to inf.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace lockstep {

inline uint16_t F32ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float Bf16ToF32(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Arrays (AVX2 where the build has it); element for element the same as the scalar forms.
void F32ToBf16(const float* in, uint16_t* out, size_t count);
void Bf16ToF32(const uint16_t* in, float* out, size_t count);

}  // namespace lockstep
