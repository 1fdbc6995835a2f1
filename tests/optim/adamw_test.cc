#include "lockstep/optim/adamw.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "lockstep/core/bf16.h"
#include "lockstep/core/rng.h"

namespace lockstep::optim {
namespace {

// Three steps on p0 = [1, -2, 0.5] with g1 = [0.5, -1, 2], g2 = [-0.25, 0.5, 1], g3 = [1, 1, -1],
// lr = 0.1, betas (0.9, 0.999), eps 1e-8.
const std::vector<float> kP0 = {1.0f, -2.0f, 0.5f};
const std::vector<std::vector<float>> kGrads = {{0.5f, -1.0f, 2.0f}, {-0.25f, 0.5f, 1.0f}, {1.0f, 1.0f, -1.0f}};

// Float arithmetic rounds each operation, so results agree with the exact values to ~1e-7
// relative; 2e-6 absolute on values of magnitude <= 2 is well above that and far below the
// size of any wrong term (the smallest update term here, eps-related, is what we don't test).
constexpr double kTol = 2e-6;

TEST(AdamW, ThreeStepsWithoutWeightDecayMatchHandComputation) {
  AdamWOptions o;
  o.weight_decay = 0.0;
  auto opt = AdamW::Create(o, {{0, 3, true}}, {0, 3});
  ASSERT_TRUE(opt.ok()) << opt.status().ToString();
  std::vector<float> p = kP0;

  // t=1: m = 0.1*g1 = [0.05, -0.1, 0.2]; v = 0.001*g1^2 = [0.00025, 0.001, 0.004].
  //      bias corrections 0.1 and 0.001 give mhat = g1, sqrt(vhat) = |g1|, so
  //      p -= 0.1 * g1/(|g1| + 1e-8) = p - 0.1*sign(g1)  ->  [0.9, -1.9, 0.4].
  opt->Step(p.data(), kGrads[0].data(), 0.1f);
  EXPECT_EQ(opt->step(), 1);
  EXPECT_NEAR(opt->m()[0], 0.05, 1e-8);
  EXPECT_NEAR(opt->m()[2], 0.2, 1e-8);
  EXPECT_NEAR(opt->v()[1], 0.001, 1e-9);
  EXPECT_NEAR(p[0], 0.9, kTol);
  EXPECT_NEAR(p[1], -1.9, kTol);
  EXPECT_NEAR(p[2], 0.4, kTol);

  // t=2: m = 0.9*m + 0.1*g2 = [0.02, -0.04, 0.28];
  //      v = 0.999*v + 0.001*g2^2 = [0.00031225, 0.001249, 0.004996];
  //      bc1 = 1-0.81 = 0.19, bc2 = 1-0.998001 = 0.001999.
  //      elem 0: mhat = 0.02/0.19 = 0.1052632, sqrt(vhat) = sqrt(0.00031225/0.001999) = 0.3952256
  //              p = 0.9 - 0.1*0.1052632/0.3952256 = 0.9 - 0.0266337 = 0.8733663
  //      elem 1: symmetric: -1.9 + 0.0266337 = -1.8733663
  //      elem 2: mhat = 1.4736842, sqrt(vhat) = 1.5809020; p = 0.4 - 0.0932180 = 0.3067820
  opt->Step(p.data(), kGrads[1].data(), 0.1f);
  EXPECT_NEAR(opt->m()[2], 0.28, 1e-7);
  EXPECT_NEAR(opt->v()[0], 0.00031225, 1e-9);
  EXPECT_NEAR(p[0], 0.873366299, kTol);
  EXPECT_NEAR(p[1], -1.873366297, kTol);
  EXPECT_NEAR(p[2], 0.306782037, kTol);

  // t=3: m = [0.118, 0.064, 0.152], v = [0.00131193775, 0.002247751, 0.005991004],
  //      bc1 = 0.271, bc2 = 0.002997001; same formula gives:
  opt->Step(p.data(), kGrads[2].data(), 0.1f);
  EXPECT_NEAR(opt->m()[0], 0.118, 1e-7);
  EXPECT_NEAR(opt->v()[2], 0.005991004, 1e-9);
  EXPECT_NEAR(p[0], 0.807555140, kTol);
  EXPECT_NEAR(p[1], -1.900635976, kTol);
  EXPECT_NEAR(p[2], 0.267111514, kTol);
}

TEST(AdamW, DecoupledWeightDecayOnlyOnDecayedSpans) {
  // wd = 0.1, lr = 0.1: decayed elements are first multiplied by 1 - 0.01 = 0.99; element 2 is a
  // "bias" (decay=false) and must follow the no-decay trajectory exactly.
  AdamWOptions o;
  o.weight_decay = 0.1;
  auto opt = AdamW::Create(o, {{0, 2, true}, {2, 1, false}}, {0, 3});
  ASSERT_TRUE(opt.ok());
  std::vector<float> p = kP0;
  // t=1: p0 = 0.99*1 - 0.1 = 0.89; p1 = 0.99*(-2) + 0.1 = -1.88; p2 = 0.5 - 0.1 = 0.4.
  opt->Step(p.data(), kGrads[0].data(), 0.1f);
  EXPECT_NEAR(p[0], 0.89, kTol);
  EXPECT_NEAR(p[1], -1.88, kTol);
  EXPECT_NEAR(p[2], 0.4, kTol);
  // t=2: p0 = 0.99*0.89 - 0.0266337 = 0.8544663; p1 = 0.99*(-1.88) + 0.0266337 = -1.8345663.
  opt->Step(p.data(), kGrads[1].data(), 0.1f);
  EXPECT_NEAR(p[0], 0.854466299, kTol);
  EXPECT_NEAR(p[1], -1.834566297, kTol);
  EXPECT_NEAR(p[2], 0.306782037, kTol);
  // t=3: p0 = 0.99*0.8544663 - 0.0650..., as computed in double:
  opt->Step(p.data(), kGrads[2].data(), 0.1f);
  EXPECT_NEAR(p[0], 0.780110477, kTol);
  EXPECT_NEAR(p[1], -1.843490313, kTol);
  EXPECT_NEAR(p[2], 0.267111514, kTol);
}

std::vector<float> RandomVector(int64_t n, uint64_t stream) {
  Rng rng(7, stream);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = rng.Normal();
  return x;
}

// Mixed decay spans with odd boundaries and a padding gap (elements 500..507 in no span).
const std::vector<ParamGroupSpan> kGroups = {
    {0, 301, true}, {301, 17, false}, {318, 182, true}, {508, 526, true}, {1037 - 3, 3, false}};
constexpr int64_t kN = 1037;

TEST(AdamW, SubRangeSteppingIsBitIdenticalToFullStepping) {
  AdamWOptions o;  // default wd 0.01
  auto full = AdamW::Create(o, kGroups, {0, kN});
  auto lo = AdamW::Create(o, kGroups, {0, 301});
  auto hi = AdamW::Create(o, kGroups, {301, kN});
  auto pieces = AdamW::Create(o, kGroups, {0, kN});
  ASSERT_TRUE(full.ok() && lo.ok() && hi.ok() && pieces.ok());
  std::vector<float> pa = RandomVector(kN, 0), pb = pa, pc = pa;
  for (int step = 0; step < 5; ++step) {
    std::vector<float> g = RandomVector(kN, 100 + step);
    float lr = 0.01f * (step + 1);
    full->Step(pa.data(), g.data(), lr);
    // Two shard owners, each holding state only for its shard.
    lo->Step(pb.data(), g.data(), lr);
    hi->Step(pb.data() + 301, g.data() + 301, lr);
    // One owner updating in uneven pieces, as ZeRO-2 does bucket by bucket.
    pieces->BeginStep();
    for (FlatRange r : {FlatRange{0, 5}, FlatRange{5, 300}, FlatRange{300, 777}, FlatRange{777, kN}}) {
      ASSERT_TRUE(pieces->UpdateRange(pc.data() + r.begin, g.data() + r.begin, r, lr).ok());
    }
  }
  EXPECT_EQ(0, std::memcmp(pa.data(), pb.data(), kN * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(pa.data(), pc.data(), kN * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(full->m().data(), pieces->m().data(), kN * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(full->v().data() + 301, hi->v().data(), (kN - 301) * sizeof(float)));
  EXPECT_EQ(lo->m().size(), 301u);  // a shard owner holds state only for its shard
  EXPECT_NE(pa, RandomVector(kN, 0));
}

// A model-sized range is split over the compute threads: the bits must not depend on how
// many there are (a split that moved work between threads with different code, or an element
// updated twice or never, would show here).
TEST(AdamW, ThreadCountDoesNotChangeABit) {
  constexpr int64_t n = (int64_t{1} << 20) + 13;  // many pieces and a ragged tail
  const std::vector<ParamGroupSpan> groups = {{0, 700000, true}, {700000, n - 700000, false}};
  std::vector<std::vector<float>> params, m;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    auto a = AdamW::Create({}, groups, {0, n});
    ASSERT_TRUE(a.ok());
    std::vector<float> p = RandomVector(n, 0);
    for (int step = 0; step < 3; ++step) a->Step(p.data(), RandomVector(n, 10 + step).data(), 0.01f);
    params.push_back(p);
    m.emplace_back(a->m().begin(), a->m().end());
  }
  omp_set_num_threads(1);
  EXPECT_NE(params[0], RandomVector(n, 0));
  for (size_t i = 1; i < params.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(params[0].data(), params[i].data(), n * sizeof(float))) << i;
    EXPECT_EQ(0, std::memcmp(m[0].data(), m[i].data(), n * sizeof(float))) << i;
  }
}

// Mixed precision's weight copy written during the update is the bf16 rounding of the updated
// parameters, element for element, over many pieces, both decay kinds and a ragged tail; and
// the parameters are those of a step without it.
TEST(AdamW, RoundedCopyIsTheBf16OfTheUpdatedParameters) {
  constexpr int64_t n = (int64_t{1} << 19) + 29;
  const std::vector<ParamGroupSpan> groups = {{0, 300001, true}, {300001, n - 300001, false}};
  auto a = AdamW::Create({}, groups, {0, n}), b = AdamW::Create({}, groups, {0, n});
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<float> pa = RandomVector(n, 0), pb = pa;
  std::vector<uint16_t> rounded(n, 0xffff);
  for (int step = 0; step < 2; ++step) {
    const std::vector<float> g = RandomVector(n, 20 + step);
    a->Step(pa.data(), g.data(), 0.01f, 0.5f, rounded.data());
    b->Step(pb.data(), g.data(), 0.01f, 0.5f);
  }
  ASSERT_EQ(0, std::memcmp(pa.data(), pb.data(), n * sizeof(float)));
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += rounded[i] != F32ToBf16(pa[i]);
  EXPECT_EQ(wrong, 0);
}

TEST(AdamW, ExportImportContinuesIdentically) {
  auto a = AdamW::Create({}, kGroups, {0, kN});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  std::vector<float> p = RandomVector(kN, 1);
  for (int step = 0; step < 3; ++step) a->Step(p.data(), RandomVector(kN, 200 + step).data(), 1e-2f);
  auto b = AdamW::Create({}, kGroups, {0, kN});
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(b->ImportState(a->step(), a->m(), a->v()).ok());
  std::vector<float> q = p;
  for (int step = 3; step < 5; ++step) {
    std::vector<float> g = RandomVector(kN, 200 + step);
    a->Step(p.data(), g.data(), 1e-2f);
    b->Step(q.data(), g.data(), 1e-2f);
  }
  EXPECT_EQ(b->step(), 5);
  EXPECT_EQ(0, std::memcmp(p.data(), q.data(), kN * sizeof(float)));
  std::vector<float> wrong(5);
  EXPECT_EQ(b->ImportState(1, wrong, wrong).code(), StatusCode::kInvalidArgument);
}

TEST(AdamW, RejectsBadInput) {
  EXPECT_EQ(AdamW::Create({}, {{0, 10, true}, {5, 10, false}}, {0, 15}).status().code(), StatusCode::kInvalidArgument);
  AdamWOptions bad;
  bad.beta2 = 1.0;
  auto r = AdamW::Create(bad, {{0, 3, true}}, {0, 3});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("optim.beta2"), std::string::npos) << r.status().message();

  auto opt = AdamW::Create({}, {{0, 10, true}}, {2, 8});
  ASSERT_TRUE(opt.ok());
  std::vector<float> p(10), g(10);
  EXPECT_EQ(opt->UpdateRange(p.data(), g.data(), {2, 4}, 0.1f).code(), StatusCode::kInternal);  // no BeginStep
  opt->BeginStep();
  EXPECT_EQ(opt->UpdateRange(p.data(), g.data(), {0, 4}, 0.1f).code(), StatusCode::kInternal);  // outside
  EXPECT_TRUE(opt->UpdateRange(p.data(), g.data(), {2, 8}, 0.1f).ok());
}

}  // namespace
}  // namespace lockstep::optim
