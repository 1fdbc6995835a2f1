// The Llama family's pieces and the whole model against a double-precision reference written
// here from transformers' LlamaForCausalLM (plain loops): RMSNorm, rotary embedding with
// rotate_half and grouped-query attention's head mapping, SwiGLU, the tied and untied model.
// Forward values, and analytic gradients against central finite differences. Each reference
// is the convention the classic mistakes get wrong: interleaved rotary pairs instead of
// rotate_half, the key/value head of query head h taken as h % kv_heads instead of
// h / (heads / kv_heads), a norm in reduced precision, a tied head that is not the embedding.
#include "lockstep/nn/llama.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lockstep/nn/activation.h"
#include "lockstep/nn/attention.h"
#include "lockstep/nn/rms_norm.h"
#include "lockstep/nn/rotary.h"
#include "lockstep/tensor/kernels.h"
#include "lockstep/tensor/precision.h"
#include "nn/grad_check.h"
#include "nn/reference.h"

namespace lockstep::nn {
namespace {

using autograd::Tape;
using autograd::Variable;
using ref::Vec;
using testing::ExpectGradientsMatch;
using testing::Leaf;
using testing::ProbeLoss;
using testing::RandomVector;
using testing::RefProbe;
using testing::ToDouble;

// --- the reference, transformers' definitions in double ---

Vec RefRmsNorm(const Vec& x, const Vec& w, int64_t n, int64_t c, double eps) {
  Vec y(x.size());
  for (int64_t i = 0; i < n; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < c; ++j) ss += x[i * c + j] * x[i * c + j];
    const double r = 1.0 / std::sqrt(ss / static_cast<double>(c) + eps);
    for (int64_t j = 0; j < c; ++j) y[i * c + j] = x[i * c + j] * r * w[j];
  }
  return y;
}

// x [B, T, heads*d]: q * cos + rotate_half(q) * sin per head, rotate_half(x) = cat(-x2, x1).
Vec RefRope(const Vec& x, int64_t B, int64_t T, int64_t heads, int64_t d, double theta) {
  Vec y(x.size());
  const int64_t half = d / 2;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < heads; ++h) {
        const double* in = &x[((b * T + t) * heads + h) * d];
        double* out = &y[((b * T + t) * heads + h) * d];
        for (int64_t i = 0; i < d; ++i) {
          const double inv = 1.0 / std::pow(theta, static_cast<double>(2 * (i % half)) / static_cast<double>(d));
          const double a = static_cast<double>(t) * inv;
          const double rotated = i < half ? -in[i + half] : in[i - half];
          out[i] = in[i] * std::cos(a) + rotated * std::sin(a);
        }
      }
  return y;
}

// Causal attention of rotated q [B,T,H*d] over k, v [B,T,KV*d]: query head h reads kv head
// h / (H / KV). Returns [B, T, H*d].
Vec RefGqa(const Vec& q, const Vec& k, const Vec& v, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t d) {
  Vec y(static_cast<size_t>(B * T * H * d), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / KV);
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> s(static_cast<size_t>(t + 1));
        double mx = -1e300;
        for (int64_t u = 0; u <= t; ++u) {
          double dot = 0;
          for (int64_t i = 0; i < d; ++i) dot += q[((b * T + t) * H + h) * d + i] * k[((b * T + u) * KV + g) * d + i];
          s[u] = dot / std::sqrt(static_cast<double>(d));
          mx = std::max(mx, s[u]);
        }
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t u = 0; u <= t; ++u)
          for (int64_t i = 0; i < d; ++i)
            y[((b * T + t) * H + h) * d + i] += s[u] / sum * v[((b * T + u) * KV + g) * d + i];
      }
    }
  return y;
}

Vec RefSwiGlu(const Vec& g, const Vec& u) {
  Vec y(g.size());
  for (size_t i = 0; i < g.size(); ++i) y[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
  return y;
}

double RefLlamaLoss(const LlamaConfig& c, ref::Params& p, const std::vector<int32_t>& tokens,
                    const std::vector<int32_t>& targets, int64_t B, int64_t T) {
  const int64_t C = c.width, D = c.head_size(), H = c.heads, KV = c.kv_heads, F = c.ffn_hidden, N = B * T;
  const int64_t V = c.padded_vocab();
  Vec x = ref::Embedding(tokens, p["embed_tokens.weight"], C);
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string L = "layers." + std::to_string(l) + ".";
    Vec h = RefRmsNorm(x, p[L + "input_layernorm.weight"], N, C, c.norm_eps);
    Vec q = RefRope(ref::Linear(h, p[L + "self_attn.q_proj.weight"], {}, N, C, H * D), B, T, H, D, c.rope_theta);
    Vec k = RefRope(ref::Linear(h, p[L + "self_attn.k_proj.weight"], {}, N, C, KV * D), B, T, KV, D, c.rope_theta);
    Vec v = ref::Linear(h, p[L + "self_attn.v_proj.weight"], {}, N, C, KV * D);
    x = ref::AddVec(x, ref::Linear(RefGqa(q, k, v, B, T, H, KV, D), p[L + "self_attn.o_proj.weight"], {}, N, H * D, C));
    Vec h2 = RefRmsNorm(x, p[L + "post_attention_layernorm.weight"], N, C, c.norm_eps);
    Vec a = RefSwiGlu(ref::Linear(h2, p[L + "mlp.gate_proj.weight"], {}, N, C, F),
                      ref::Linear(h2, p[L + "mlp.up_proj.weight"], {}, N, C, F));
    x = ref::AddVec(x, ref::Linear(a, p[L + "mlp.down_proj.weight"], {}, N, F, C));
  }
  Vec xf = RefRmsNorm(x, p["norm.weight"], N, C, c.norm_eps);
  Vec logits = ref::Linear(xf, c.tie_embeddings ? p["embed_tokens.weight"] : p["lm_head.weight"], {}, N, C, V);
  return ref::CrossEntropy(logits, targets, N, V);
}

// --- the pieces ---

TEST(RmsNorm, MatchesReferenceAndGradients) {
  const int64_t n = 6, c = 7;
  Tape tape;
  std::vector<float> xv = RandomVector(n * c, 1.5f, 1), wv = RandomVector(c, 1.0f, 2), r = RandomVector(n * c, 1.0f, 3);
  Variable x = Leaf(tape, {n, c}, xv);
  Variable w = Leaf(tape, {c}, wv);
  Variable y = RmsNormForward(tape, x, w, 1e-5f);
  Vec xd = ToDouble(xv), wd = ToDouble(wv);
  auto f = [&] { return RefProbe(RefRmsNorm(xd, wd, n, c, 1e-5), r); };
  Variable loss = ProbeLoss(tape, y, r);
  EXPECT_NEAR(loss.data()[0], f(), 1e-5);
  tape.Backward(loss, 1.0f);
  ExpectGradientsMatch({{"x", &xd, x.grad().ToVector()}, {"weight", &wd, w.grad().ToVector()}}, f);
}

// The norm runs in fp32 whatever the products' precision (transformers upcasts to fp32).
TEST(RmsNorm, RunsInFp32UnderBf16Precision) {
  std::vector<float> xv = RandomVector(4 * 16, 3.0f, 4), wv = RandomVector(16, 1.0f, 5);
  std::vector<float> fp32, bf16;
  for (tensor::Precision p : {tensor::Precision::kF32, tensor::Precision::kBF16}) {
    tensor::ScopedPrecision scope(p);
    Tape tape;
    tape.set_grad_enabled(false);
    Variable y = RmsNormForward(tape, Leaf(tape, {4, 16}, xv), Leaf(tape, {16}, wv), 1e-5f);
    (p == tensor::Precision::kF32 ? fp32 : bf16) = y.value().ToVector();
  }
  EXPECT_EQ(bf16, fp32);
}

// PackRotaryQkv + attention against rotate_half and h / (heads / kv_heads), gradients of q,
// k and v included. 4 query heads over 2 key/value heads: the group mapping (0,0,1,1) differs
// from h % kv_heads (0,1,0,1), and rotate_half differs from interleaved pairs, so either
// mistake fails the forward comparison.
TEST(Rotary, GroupedQueryAttentionMatchesReferenceAndGradients) {
  const int64_t B = 2, T = 5, H = 4, KV = 2, d = 6;
  const double theta = 10000.0;
  RotaryTables tables = MakeRotaryTables(d, T, theta, RopeScaling{});
  Tape tape;
  std::vector<float> qv = RandomVector(B * T * H * d, 1.0f, 6), kv = RandomVector(B * T * KV * d, 1.0f, 7),
                     vv = RandomVector(B * T * KV * d, 1.0f, 8), r = RandomVector(B * T * H * d, 1.0f, 9);
  Variable q = Leaf(tape, {B, T, H * d}, qv), k = Leaf(tape, {B, T, KV * d}, kv), v = Leaf(tape, {B, T, KV * d}, vv);
  Variable packed = PackRotaryQkvForward(tape, q, k, v, H, KV, tables);
  Variable y = AttentionForward(tape, packed, H);
  Vec qd = ToDouble(qv), kd = ToDouble(kv), vd = ToDouble(vv);
  auto f = [&] {
    return RefProbe(RefGqa(RefRope(qd, B, T, H, d, theta), RefRope(kd, B, T, KV, d, theta), vd, B, T, H, KV, d), r);
  };
  Variable loss = ProbeLoss(tape, y, r);
  EXPECT_NEAR(loss.data()[0], f(), 1e-4 * std::max(1.0, std::fabs(f())));
  tape.Backward(loss, 1.0f);
  ExpectGradientsMatch(
      {{"q", &qd, q.grad().ToVector()}, {"k", &kd, k.grad().ToVector()}, {"v", &vd, v.grad().ToVector()}}, f);
}

// The tables in fp32 as transformers builds them; llama3 scaling as its
// _compute_llama3_parameters: long wavelengths divided by the factor, short ones kept, the
// band between blended.
TEST(Rotary, TablesAndLlama3Scaling) {
  const int64_t d = 8, T = 3;
  RotaryTables t = MakeRotaryTables(d, T, 500000.0, RopeScaling{});
  ASSERT_EQ(t.half, 4);
  for (int64_t p = 0; p < T; ++p)
    for (int64_t i = 0; i < 4; ++i) {
      const double inv = 1.0 / std::pow(500000.0, 2.0 * static_cast<double>(i) / 8.0);
      EXPECT_NEAR(t.cos[p * 4 + i], std::cos(static_cast<double>(p) * inv), 1e-6);
      EXPECT_NEAR(t.sin[p * 4 + i], std::sin(static_cast<double>(p) * inv), 1e-6);
    }
  RopeScaling s;
  s.type = "llama3";
  s.factor = 8;
  s.low_freq_factor = 1;
  s.high_freq_factor = 4;
  s.original_context = 64;  // wavelengths < 16 kept, > 64 divided by 8, between blended
  RotaryTables scaled = MakeRotaryTables(d, 2, 500000.0, s);
  for (int64_t i = 0; i < 4; ++i) {
    const double inv = 1.0 / std::pow(500000.0, 2.0 * static_cast<double>(i) / 8.0);
    const double wavelen = 2 * M_PI / inv;
    double want = inv;
    if (wavelen > 64) {
      want = inv / 8;
    } else if (wavelen >= 16) {
      const double smooth = (64 / wavelen - 1) / (4 - 1);
      want = (1 - smooth) * inv / 8 + smooth * inv;
    }
    EXPECT_NEAR(scaled.sin[4 + i], std::sin(want), 1e-6) << "frequency " << i << ", wavelength " << wavelen;
  }
}

TEST(SwiGlu, MatchesReferenceAndGradients) {
  Tape tape;
  std::vector<float> gv = RandomVector(30, 3.0f, 10), uv = RandomVector(30, 2.0f, 11), r = RandomVector(30, 1.0f, 12);
  Variable g = Leaf(tape, {5, 6}, gv), u = Leaf(tape, {5, 6}, uv);
  Variable y = SwiGluForward(tape, g, u);
  Vec gd = ToDouble(gv), ud = ToDouble(uv);
  auto f = [&] { return RefProbe(RefSwiGlu(gd, ud), r); };
  Variable loss = ProbeLoss(tape, y, r);
  EXPECT_NEAR(loss.data()[0], f(), 1e-5);
  tape.Backward(loss, 1.0f);
  ExpectGradientsMatch({{"gate", &gd, g.grad().ToVector()}, {"up", &ud, u.grad().ToVector()}}, f);
}

// The vectorized gate gives an element the same bits wherever it falls: alone (a masked tail
// of one lane), or inside full vectors and across task chunks; and extreme gates saturate
// instead of overflowing into NaN.
TEST(SwiGlu, AnElementsBitsDoNotDependOnItsPlace) {
  const int64_t n = 5000;  // more than one 4096-element chunk, and a tail of 8 on 16 lanes
  std::vector<float> g = RandomVector(n, 6.0f, 21), u = RandomVector(n, 2.0f, 22), d = RandomVector(n, 1.0f, 23);
  g[7] = 100.0f, g[8] = -100.0f, g[9] = 0.0f;
  std::vector<float> out(n), dg(n, 0.5f), du(n, -0.25f);
  tensor::SwiGluForward(out.data(), g.data(), u.data(), n);
  tensor::SwiGluBackward(dg.data(), du.data(), d.data(), g.data(), u.data(), n);
  for (int64_t i : {int64_t{0}, int64_t{7}, int64_t{8}, int64_t{9}, int64_t{15}, int64_t{4095}, int64_t{4096},
                    n - 1}) {
    float o1, dg1 = 0.5f, du1 = -0.25f;
    tensor::SwiGluForward(&o1, &g[i], &u[i], 1);
    tensor::SwiGluBackward(&dg1, &du1, &d[i], &g[i], &u[i], 1);
    EXPECT_EQ(o1, out[i]) << i;
    EXPECT_EQ(dg1, dg[i]) << i;
    EXPECT_EQ(du1, du[i]) << i;
  }
  for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(std::isfinite(out[i]) && std::isfinite(dg[i]) && std::isfinite(du[i])) << i;
  EXPECT_FLOAT_EQ(out[7], 100.0f * u[7]);  // silu(100) = 100
  EXPECT_NEAR(out[8], 0.0f, 1e-30f);          // silu(-100): the exp is clamped, so about -100 * 1e-38
}

// --- the model ---

LlamaConfig Tiny(bool tied) {
  LlamaConfig c;
  c.vocab = 11;
  c.context = 5;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.width = 8;
  c.head_dim = 4;  // not width / heads (2): and at 2 rotate_half and interleaved pairs coincide
  c.ffn_hidden = 12;
  c.tie_embeddings = tied;
  c.init_seed = 3;
  return c;
}

// The whole model's loss against the reference, and the gradients of every parameter tensor
// (a sample of coordinates each), tied and untied; with the head tied there is no lm_head
// and the logits read the embedding.
TEST(Llama, LossAndGradientsMatchTheReference) {
  for (bool tied : {false, true}) {
    const LlamaConfig c = Tiny(tied);
    Llama model(c);
    // Larger weights than the init's 0.02 so that every term matters to the loss.
    std::vector<float> v = RandomVector(model.params().numel(), 0.5f, 13);
    for (int64_t i = 0; i < model.params().numel(); ++i) model.params().flat_params()[i] = v[i] + (i % 7 == 0);
    EXPECT_EQ(model.params().numel(), LlamaParamCount(c));
    EXPECT_EQ(model.params().Find("lm_head.weight") >= 0, !tied);
    const int64_t B = 2, T = 5;
    std::vector<int32_t> tokens(B * T), targets(B * T);
    for (int64_t i = 0; i < B * T; ++i) {
      tokens[i] = static_cast<int32_t>((i * 7 + 3) % c.vocab);
      targets[i] = i == 4 ? -1 : static_cast<int32_t>((i * 5 + 1) % c.vocab);
    }
    ref::Params p = ref::FromStore(model.params());
    auto f = [&] { return RefLlamaLoss(c, p, tokens, targets, B, T); };
    Tape tape;
    tape.DeclareParams(model.params().size());
    ModelInput in;
    in.tokens = tokens.data();
    in.targets = targets.data();
    in.batch = B;
    in.seq = T;
    model.params().ZeroGrad();
    Variable loss = model.Loss(tape, in);
    EXPECT_NEAR(loss.data()[0], f(), 1e-4) << "tied " << tied;
    tape.Backward(loss, 1.0f);
    std::vector<testing::Checked> checked;
    for (int i = 0; i < model.params().size(); ++i) {
      const std::string& name = model.params().info(i).name;
      checked.push_back({name, &p[name], model.params().grad(i).ToVector()});
    }
    testing::GradCheckOptions o;
    o.coords = 6;
    ExpectGradientsMatch(checked, f, o);
  }
}

TEST(Llama, ConfigErrorsNameTheKey) {
  LlamaConfig c = Tiny(false);
  c.kv_heads = 3;
  EXPECT_NE(ValidateLlamaConfig(c).message().find("model.kv_heads"), std::string::npos);
  c = Tiny(false);
  c.head_dim = 3;
  EXPECT_NE(ValidateLlamaConfig(c).message().find("even head dimension"), std::string::npos);
  c = Tiny(false);
  c.rope_scaling.type = "yarn";
  EXPECT_NE(ValidateLlamaConfig(c).message().find("\"yarn\" is not implemented"), std::string::npos);
  c = Tiny(false);
  c.width = 10;
  c.head_dim = 0;  // width / heads, which 10 / 4 is not
  EXPECT_NE(ValidateLlamaConfig(c).message().find("model.width"), std::string::npos);
  EXPECT_TRUE(ValidateLlamaConfig(Tiny(true)).ok());
}

}  // namespace
}  // namespace lockstep::nn
