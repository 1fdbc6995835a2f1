// Double-precision reference implementations of every nn layer and of both models,
// written independently of the engine (plain loops, straight from the PyTorch peers'
// definitions). Tests compare the engine's fp32 forward against them and its analytic
// gradients against central finite differences of them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lockstep/nn/gpt.h"

namespace lockstep::nn::ref {

using Vec = std::vector<double>;
using Params = std::map<std::string, Vec>;  // by parameter name

// y[n, oc] = x[n, ic] w[oc, ic]^T + b (b empty: none).
Vec Linear(const Vec& x, const Vec& w, const Vec& b, int64_t n, int64_t ic, int64_t oc);
Vec LayerNorm(const Vec& x, const Vec& w, const Vec& b, int64_t n, int64_t c, double eps = 1e-5);
Vec Gelu(const Vec& x);  // tanh approximation
Vec Relu(const Vec& x);
Vec Embedding(const std::vector<int32_t>& ids, const Vec& table, int64_t c);
// qkv [B, T, 3C] packed q|k|v -> [B, T, C], causal, H heads.
Vec Attention(const Vec& qkv, int64_t B, int64_t T, int64_t C, int64_t H);
// x [N, IC, H, W], w [OC, IC, K, K], stride 1, zero padding `pad`.
Vec Conv2d(const Vec& x, const Vec& w, const Vec& b, int64_t N, int64_t IC, int64_t H, int64_t W, int64_t OC, int64_t K,
           int64_t pad);
Vec MaxPool2x2(const Vec& x, int64_t N, int64_t C, int64_t H, int64_t W);
// Mean over rows with target >= 0.
double CrossEntropy(const Vec& logits, const std::vector<int32_t>& targets, int64_t n, int64_t v);
Vec AddVec(const Vec& a, const Vec& b);

// Whole models, as the peers compute them.
double GptLoss(const GptConfig& c, const Params& p, const std::vector<int32_t>& tokens,
               const std::vector<int32_t>& targets, int64_t B, int64_t T);
double CnnLoss(const Params& p, const Vec& images, const std::vector<int32_t>& labels, int64_t N);

// The Cnn reference split at its expensive convolution, so finite differences can
// recompute only what a perturbed coordinate changes: Run() caches every stage; the
// LossAfter* functions recompute from a changed parameter onwards.
class CnnStaged {
 public:
  CnnStaged(const Params* p, const Vec* images, const std::vector<int32_t>* labels, int64_t n);
  double Run();                                   // full forward; caches a1, p1, a2
  double LossAfterFc() const;                     // fc.* changed
  double LossAfterConv2Channel(int64_t o) const;  // conv2 output channel o's params changed
  double LossAfterConv1Channel(int64_t c) const;  // conv1 output channel c's params changed

 private:
  double Head(const Vec& a2) const;  // relu, pool, fc, cross-entropy
  const Params* p_;
  const Vec* images_;
  const std::vector<int32_t>* labels_;
  int64_t n_;
  Vec a1_, p1_, a2_, p2_;
};

// Copies a model's fp32 parameters into double vectors keyed by name.
Params FromStore(const ParameterStore& ps);

}  // namespace lockstep::nn::ref
