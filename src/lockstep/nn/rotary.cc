#include "lockstep/nn/rotary.h"

#include <cmath>

#include "lockstep/tensor/check.h"
#include "lockstep/tensor/kernels.h"

namespace lockstep::nn {

RotaryTables MakeRotaryTables(int64_t d, int64_t positions, double theta, const RopeScaling& scaling) {
  RotaryTables t;
  t.positions = positions;
  t.half = d / 2;
  std::vector<float> inv(static_cast<size_t>(t.half));
  // transformers: 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), all in float32.
  for (int64_t i = 0; i < t.half; ++i)
    inv[i] = 1.0f / std::pow(static_cast<float>(theta), static_cast<float>(2 * i) / static_cast<float>(d));
  if (scaling.type == "llama3") {
    const double low_wavelen = static_cast<double>(scaling.original_context) / scaling.low_freq_factor;
    const double high_wavelen = static_cast<double>(scaling.original_context) / scaling.high_freq_factor;
    for (float& f : inv) {
      const double wavelen = 2.0 * M_PI / f;
      if (wavelen < high_wavelen) continue;  // high frequencies: kept
      if (wavelen > low_wavelen) {           // low frequencies: slowed by the factor
        f = static_cast<float>(f / scaling.factor);
        continue;
      }
      const double smooth = (static_cast<double>(scaling.original_context) / wavelen - scaling.low_freq_factor) /
                            (scaling.high_freq_factor - scaling.low_freq_factor);
      f = static_cast<float>((1.0 - smooth) * f / scaling.factor + smooth * f);
    }
  }
  t.cos.resize(static_cast<size_t>(positions * t.half));
  t.sin.resize(t.cos.size());
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t i = 0; i < t.half; ++i) {
      const float angle = static_cast<float>(p) * inv[i];
      t.cos[p * t.half + i] = std::cos(angle);
      t.sin[p * t.half + i] = std::sin(angle);
    }
  return t;
}

Variable PackRotaryQkvForward(Tape& tape, const Variable& q, const Variable& k, const Variable& v, int64_t heads,
                              int64_t kv_heads, const RotaryTables& tables) {
  const tensor::Shape& s = q.shape();
  LS_CHECK(s.size() == 3 && heads >= 1 && kv_heads >= 1 && heads % kv_heads == 0)
      << "PackRotaryQkv: q " << q.value().ToString() << ", heads " << heads << ", kv_heads " << kv_heads;
  const int64_t B = s[0], T = s[1], d = s[2] / heads;
  LS_CHECK(d * heads == s[2] && d % 2 == 0 && d / 2 == tables.half && T <= tables.positions)
      << "PackRotaryQkv: q " << q.value().ToString() << " for " << heads << " heads of an even size, tables ["
      << tables.positions << ", " << tables.half << "]";
  LS_CHECK(k.shape() == tensor::Shape({B, T, kv_heads * d}) && v.shape() == k.shape())
      << "PackRotaryQkv: k " << k.value().ToString() << ", v " << v.value().ToString();
  const bool rec = tape.ShouldRecord({&q, &k, &v});
  Variable packed = tape.NewActivation({B, T, 3 * heads * d}, rec);
  const float* cos = tables.cos.data();
  const float* sin = tables.sin.data();
  tensor::PackRotaryQkv(packed.data(), q.data(), k.data(), v.data(), cos, sin, B * T, T, heads, kv_heads, d);
  if (rec) {
    // The tables outlive the step: the model that owns them outlives its tape.
    tape.Record({q, k, v}, [packed, q, k, v, cos, sin, B, T, heads, kv_heads, d] {
      if (!packed.has_grad()) return;
      tensor::PackRotaryQkvBackward(q.requires_grad() ? q.GradAccumulate() : nullptr,
                                    k.requires_grad() ? k.GradAccumulate() : nullptr,
                                    v.requires_grad() ? v.GradAccumulate() : nullptr, packed.grad().data<float>(), cos,
                                    sin, B * T, T, heads, kv_heads, d);
    });
  }
  return packed;
}

}  // namespace lockstep::nn
