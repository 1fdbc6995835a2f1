// Deterministic mode: every kernel gives identical bits for 1, 2 and 3 compute threads, at
// sizes large enough to take the parallel paths (GPT-tiny shapes).
#include <gtest/gtest.h>

#include <functional>

#include "lockstep/tensor/kernels.h"
#include "lockstep/tensor/threads.h"
#include "tensor/tensor_test_util.h"

namespace lockstep::tensor {
namespace {

using testing::RandomVector;

// Runs `body` (which appends all its outputs to the vector) under 1, 2, 3 threads.
void ExpectThreadInvariant(const std::string& what, const std::function<void(std::vector<float>&)>& body) {
  ScopedDeterministic det(true);
  std::vector<float> ref;
  for (int threads : {1, 2, 3}) {
    ScopedComputeThreads t(threads);
    std::vector<float> got;
    body(got);
    if (threads == 1)
      ref = got;
    else
      EXPECT_TRUE(testing::BitEqual(got, ref)) << what << " with " << threads << " threads";
  }
}

constexpr int64_t kN = 2048, kC = 128;

TEST(Deterministic, Linear) {
  const int64_t ic = kC, oc = 3 * kC;
  auto x = RandomVector(kN * ic, 1), w = RandomVector(oc * ic, 2), b = RandomVector(oc, 3);
  auto g = RandomVector(kN * oc, 4);
  ExpectThreadInvariant("linear", [&](std::vector<float>& all) {
    std::vector<float> out(kN * oc), dx(kN * ic, 0.0f), dw(oc * ic, 0.0f), db(oc, 0.0f);
    LinearForward(out.data(), x.data(), w.data(), b.data(), kN, ic, oc);
    LinearBackward(dx.data(), dw.data(), db.data(), g.data(), x.data(), w.data(), kN, ic, oc);
    for (auto* v : {&out, &dx, &dw, &db}) all.insert(all.end(), v->begin(), v->end());
  });
}

TEST(Deterministic, LayerNormGeluSoftmax) {
  auto x = RandomVector(kN * kC, 5, 3.0f), w = RandomVector(kC, 6), b = RandomVector(kC, 7);
  auto g = RandomVector(kN * kC, 8);
  ExpectThreadInvariant("layernorm/gelu/softmax", [&](std::vector<float>& all) {
    std::vector<float> out(kN * kC), mean(kN), rstd(kN), dx(kN * kC, 0.0f), dw(kC, 0.0f), db(kC, 0.0f), gl(kN * kC),
        dgl(kN * kC, 0.0f), sm(kN * kC);
    LayerNormForward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), kN, kC, 1e-5f);
    LayerNormBackward(dx.data(), dw.data(), db.data(), g.data(), x.data(), w.data(), mean.data(), rstd.data(), kN, kC);
    GeluForward(gl.data(), x.data(), kN * kC);
    GeluBackward(dgl.data(), x.data(), g.data(), kN * kC);
    SoftmaxRows(sm.data(), x.data(), kN, kC);
    for (auto* v : {&out, &mean, &rstd, &dx, &dw, &db, &gl, &dgl, &sm}) all.insert(all.end(), v->begin(), v->end());
  });
}

TEST(Deterministic, CrossEntropyEmbeddingReductions) {
  const int64_t V = 256;
  auto logits = RandomVector(kN * V, 9, 4.0f);
  auto targets = testing::RandomIds(kN, V, 10);
  auto table = RandomVector(V * kC, 11);
  auto g = RandomVector(kN * kC, 12);
  ExpectThreadInvariant("ce/embedding/sums", [&](std::vector<float>& all) {
    std::vector<float> losses(kN), dl(kN * V), emb(kN * kC), dt(V * kC, 0.0f);
    double mean = SoftmaxCrossEntropy(losses.data(), dl.data(), logits.data(), targets.data(), kN, V, 1.0f / kN);
    EmbeddingForward(emb.data(), targets.data(), table.data(), kN, kC);
    EmbeddingBackward(dt.data(), targets.data(), g.data(), kN, kC);
    double ss = SumSquares(logits.data(), kN * V), s = Sum(logits.data(), kN * V);
    for (auto* v : {&losses, &dl, &emb, &dt}) all.insert(all.end(), v->begin(), v->end());
    // Doubles compared through their two float halves' bit patterns.
    for (double d : {mean, ss, s}) {
      float parts[2];
      std::memcpy(parts, &d, sizeof d);
      all.insert(all.end(), parts, parts + 2);
    }
  });
}

TEST(Deterministic, MaxPoolAndAttention) {
  const int64_t N = 16, C = 32, H = 28, W = 28;
  auto img = RandomVector(N * C * H * W, 13);
  auto gp = RandomVector(N * C * H * W / 4, 14);
  const int64_t B = 4, T = 128, AC = 128, AH = 4;
  auto qkv = RandomVector(B * T * 3 * AC, 15);
  auto ga = RandomVector(B * T * AC, 16);
  ExpectThreadInvariant("maxpool/attention", [&](std::vector<float>& all) {
    std::vector<float> out(N * C * H * W / 4), dimg(N * C * H * W, 0.0f);
    std::vector<int32_t> am(out.size());
    MaxPool2x2Forward(out.data(), am.data(), img.data(), N, C, H, W);
    MaxPool2x2Backward(dimg.data(), am.data(), gp.data(), N, C, H, W);
    std::vector<float> ao(B * T * AC), att(B * AH * T * T), dqkv(qkv.size(), 0.0f);
    AttentionForward(ao.data(), att.data(), qkv.data(), B, T, AC, AH);
    AttentionBackward(dqkv.data(), ga.data(), qkv.data(), att.data(), B, T, AC, AH);
    for (auto* v : {&out, &dimg, &ao, &att, &dqkv}) all.insert(all.end(), v->begin(), v->end());
  });
}

}  // namespace
}  // namespace lockstep::tensor
