#include "lockstep/optim/sgd.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "lockstep/core/bf16.h"
#include "lockstep/core/rng.h"

namespace lockstep::optim {
namespace {

// p0 = [1, -2, 0.5]; g1 = [0.5, -1, 2], g2 = [-0.25, 0.5, 1], g3 = [1, 1, -1]; lr = 0.1.
const std::vector<float> kP0 = {1.0f, -2.0f, 0.5f};
const std::vector<std::vector<float>> kGrads = {{0.5f, -1.0f, 2.0f}, {-0.25f, 0.5f, 1.0f}, {1.0f, 1.0f, -1.0f}};
constexpr double kTol = 1e-6;  // a few float roundings on values <= 2

std::vector<std::vector<float>> RunSgd(const SgdOptions& o, const std::vector<ParamGroupSpan>& groups) {
  auto opt = Sgd::Create(o, groups, {0, 3});
  EXPECT_TRUE(opt.ok()) << opt.status().ToString();
  std::vector<float> p = kP0;
  std::vector<std::vector<float>> trajectory;
  for (const auto& g : kGrads) {
    opt->Step(p.data(), g.data(), 0.1f);
    trajectory.push_back(p);
  }
  return trajectory;
}

void ExpectNear(const std::vector<float>& got, std::vector<double> want) {
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], kTol) << "element " << i;
}

TEST(Sgd, PlainStepsAreMinusLrTimesGrad) {
  auto t = RunSgd({}, {{0, 3, true}});
  ExpectNear(t[0], {0.95, -1.9, 0.3});    // p0 - 0.1*g1
  ExpectNear(t[1], {0.975, -1.95, 0.2});  // - 0.1*g2
  ExpectNear(t[2], {0.875, -2.05, 0.3});  // - 0.1*g3
}

TEST(Sgd, MomentumFirstBufferIsTheGradient) {
  SgdOptions o;
  o.momentum = 0.9;
  auto t = RunSgd(o, {{0, 3, true}});
  // t=1: buf = g1 = [0.5, -1, 2]          p = [0.95, -1.9, 0.3]
  // t=2: buf = 0.9*g1 + g2 = [0.2, -0.4, 2.8]          p -= 0.1*buf -> [0.93, -1.86, 0.02]
  // t=3: buf = 0.9*buf + g3 = [1.18, 0.64, 1.52]       p -> [0.812, -1.924, -0.132]
  ExpectNear(t[0], {0.95, -1.9, 0.3});
  ExpectNear(t[1], {0.93, -1.86, 0.02});
  ExpectNear(t[2], {0.812, -1.924, -0.132});
}

TEST(Sgd, Nesterov) {
  SgdOptions o;
  o.momentum = 0.9;
  o.nesterov = true;
  auto t = RunSgd(o, {{0, 3, true}});
  // Same buffers as above; the step uses g + 0.9*buf:
  // t=1: d = g1 + 0.9*g1 = [0.95, -1.9, 3.8]               p = [0.905, -1.81, 0.12]
  // t=2: d = g2 + 0.9*[0.2, -0.4, 2.8] = [-0.07, 0.14, 3.52] p = [0.912, -1.824, -0.232]
  // t=3: d = g3 + 0.9*[1.18, 0.64, 1.52] = [2.062, 1.576, 0.368] p = [0.7058, -1.9816, -0.2688]
  ExpectNear(t[0], {0.905, -1.81, 0.12});
  ExpectNear(t[1], {0.912, -1.824, -0.232});
  ExpectNear(t[2], {0.7058, -1.9816, -0.2688});
}

TEST(Sgd, WeightDecayAndDampening) {
  SgdOptions o;
  o.momentum = 0.9;
  o.dampening = 0.5;
  o.weight_decay = 0.01;
  auto t = RunSgd(o, {{0, 3, true}});
  // t=1: d = g1 + 0.01*p0 = [0.51, -1.02, 2.005]; buf = d (no dampening on the first step,
  //      as in PyTorch); p = [0.949, -1.898, 0.2995]
  // t=2: d = g2 + 0.01*p = [-0.24051, 0.48102, 1.002995];
  //      buf = 0.9*buf + 0.5*d = [0.338745, -0.67749, 2.3059975]; p -= 0.1*buf
  // t=3: d = g3 + 0.01*p; buf = 0.9*buf + 0.5*d = [0.80944613, -0.11889226, 1.57574225]
  ExpectNear(t[0], {0.949, -1.898, 0.2995});
  ExpectNear(t[1], {0.9151255, -1.830251, 0.06890025});
  ExpectNear(t[2], {0.834180887, -1.818361774, -0.088673975});
}

TEST(Sgd, WeightDecaySkipsNonDecayedSpans) {
  SgdOptions o;
  o.weight_decay = 0.5;
  auto t = RunSgd(o, {{0, 1, true}, {1, 2, false}});
  // Element 0: 1 - 0.1*(0.5 + 0.5*1) = 0.9; elements 1, 2 as plain SGD.
  ExpectNear(t[0], {0.9, -1.9, 0.3});
}

TEST(Sgd, SubRangeSteppingIsBitIdenticalToFullStepping) {
  constexpr int64_t n = 517;
  SgdOptions o;
  o.momentum = 0.9;
  o.weight_decay = 1e-3;
  o.nesterov = true;
  std::vector<ParamGroupSpan> groups = {{0, 123, true}, {123, 9, false}, {132, 385, true}};
  auto full = Sgd::Create(o, groups, {0, n});
  auto lo = Sgd::Create(o, groups, {0, 130});
  auto hi = Sgd::Create(o, groups, {130, n});
  ASSERT_TRUE(full.ok() && lo.ok() && hi.ok());
  Rng rng(3, 0);
  std::vector<float> pa(n);
  for (float& x : pa) x = rng.Normal();
  std::vector<float> pb = pa;
  for (int step = 0; step < 4; ++step) {
    std::vector<float> g(n);
    for (float& x : g) x = rng.Normal();
    full->Step(pa.data(), g.data(), 0.05f);
    lo->Step(pb.data(), g.data(), 0.05f);
    hi->Step(pb.data() + 130, g.data() + 130, 0.05f);
  }
  EXPECT_EQ(0, std::memcmp(pa.data(), pb.data(), n * sizeof(float)));
  EXPECT_EQ(hi->momentum_buffer().size(), static_cast<size_t>(n - 130));
}

// As AdamW's: the copy written during the update is the bf16 rounding of the result.
TEST(Sgd, RoundedCopyIsTheBf16OfTheUpdatedParameters) {
  constexpr int64_t n = (int64_t{1} << 18) + 7;
  SgdOptions o;
  o.momentum = 0.9;
  o.weight_decay = 0.1;
  auto s = Sgd::Create(o, {{0, 1000, false}, {1000, n - 1000, true}}, {0, n});
  ASSERT_TRUE(s.ok());
  Rng rng(3, 0);
  std::vector<float> p(n), g(n);
  for (int64_t i = 0; i < n; ++i) {
    p[i] = rng.Uniform() * 4 - 2;
    g[i] = rng.Uniform() - 0.5f;
  }
  std::vector<uint16_t> rounded(n, 0xffff);
  s->Step(p.data(), g.data(), 0.1f, 1.0f, rounded.data());
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += rounded[i] != F32ToBf16(p[i]);
  EXPECT_EQ(wrong, 0);
}

TEST(Sgd, StateExportImportAndValidation) {
  SgdOptions o;
  o.momentum = 0.9;
  auto a = Sgd::Create(o, {{0, 3, true}}, {0, 3});
  ASSERT_TRUE(a.ok());
  std::vector<float> p = kP0;
  a->Step(p.data(), kGrads[0].data(), 0.1f);
  auto b = Sgd::Create(o, {{0, 3, true}}, {0, 3});
  ASSERT_TRUE(b->ImportState(a->step(), a->momentum_buffer()).ok());
  std::vector<float> q = p;
  a->Step(p.data(), kGrads[1].data(), 0.1f);
  b->Step(q.data(), kGrads[1].data(), 0.1f);
  EXPECT_EQ(p, q);

  auto no_momentum = Sgd::Create({}, {{0, 3, true}}, {0, 3});
  EXPECT_TRUE(no_momentum->momentum_buffer().empty());  // plain SGD keeps no state

  SgdOptions bad;
  bad.nesterov = true;
  auto r = Sgd::Create(bad, {{0, 3, true}}, {0, 3});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("optim.nesterov"), std::string::npos);
  bad = {};
  bad.momentum = -1;
  EXPECT_EQ(Sgd::Create(bad, {{0, 3, true}}, {0, 3}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lockstep::optim
