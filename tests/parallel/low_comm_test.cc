// PowerSgd and DilocoSync (parallel/powersgd.h, parallel/diloco.h) against direct
// computations, over the threads backend.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "lockstep/core/rng.h"
#include "lockstep/parallel/diloco.h"
#include "lockstep/parallel/powersgd.h"
#include "parallel_test_util.h"

namespace lockstep::parallel {
namespace {

using testing::RunRanks;
using Comm = std::shared_ptr<comm::Communicator>;

// A matrix of 12 x 10 (compressed at rank 2: 2 x 22 <= 60) and a vector of 5 (sent as is).
void AddParams(nn::ParameterStore* ps) {
  ps->Add("a.weight", {12, 10}, nn::Init::Zeros(), false);
  ps->Add("a.bias", {5}, nn::Init::Zeros(), false);
  ps->Allocate();
}

std::vector<float> Gradient(int rank, int64_t n, uint64_t salt) {
  Rng rng(salt, static_cast<uint64_t>(rank));
  std::vector<float> g(static_cast<size_t>(n));
  for (float& v : g) v = rng.Normal();
  return g;
}

TEST(PowerSgd, TheApproximationIsTheRankRProjectionOfTheSummedGradientAndTheErrorsCarryTheRest) {
  constexpr int kWorld = 2, kRank = 2;
  RunRanks(kWorld, [](Comm c) {
    nn::ParameterStore ps;
    AddParams(&ps);
    const int64_t n = ps.numel();
    PowerSgdOptions o;
    o.rank = kRank;
    o.seed = 9;
    o.total_slots = kWorld;
    auto made = PowerSgd::Create(c, ps, 1, o);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    PowerSgd& p = **made;
    ASSERT_EQ(p.compressed_params(), 1);
    const std::vector<float> q0(p.q().begin(), p.q().begin() + 10 * kRank);
    std::vector<float> g = Gradient(c->rank(), n, 1), mine = g, out(static_cast<size_t>(n));
    float* slot = g.data();
    ASSERT_TRUE(p.Reduce(&slot, out.data()).ok());
    // Direct: M = sum over ranks, P = orth(M Q0), Q = M^T P, approx = P Q^T.
    std::vector<float> m(static_cast<size_t>(n), 0.0f);
    for (int r = 0; r < kWorld; ++r) {
      std::vector<float> gr = Gradient(r, n, 1);
      for (int64_t i = 0; i < n; ++i) m[i] += gr[i];
    }
    std::vector<double> pm(12 * kRank, 0.0);
    for (int i = 0; i < 12; ++i)
      for (int j = 0; j < 10; ++j)
        for (int k = 0; k < kRank; ++k) pm[i * kRank + k] += m[i * 10 + j] * q0[k * 10 + j];
    for (int k = 0; k < kRank; ++k) {
      for (int d = 0; d < k; ++d) {
        double dot = 0;
        for (int i = 0; i < 12; ++i) dot += pm[i * kRank + k] * pm[i * kRank + d];
        for (int i = 0; i < 12; ++i) pm[i * kRank + k] -= dot * pm[i * kRank + d];
      }
      double norm = 0;
      for (int i = 0; i < 12; ++i) norm += pm[i * kRank + k] * pm[i * kRank + k];
      for (int i = 0; i < 12; ++i) pm[i * kRank + k] /= std::sqrt(norm);
    }
    std::vector<double> qm(10 * kRank, 0.0);
    for (int i = 0; i < 12; ++i)
      for (int j = 0; j < 10; ++j)
        for (int k = 0; k < kRank; ++k) qm[j * kRank + k] += m[i * 10 + j] * pm[i * kRank + k];
    for (int i = 0; i < 12; ++i)
      for (int j = 0; j < 10; ++j) {
        double want = 0;
        for (int k = 0; k < kRank; ++k) want += pm[i * kRank + k] * qm[j * kRank + k];
        ASSERT_NEAR(out[i * 10 + j], want, 1e-4) << i << "," << j;
        // Error feedback: this rank's gradient minus its half of the approximation, exactly.
        EXPECT_EQ(p.error(0)[i * 10 + j], mine[i * 10 + j] - out[i * 10 + j] * 0.5f);
        EXPECT_NEAR(p.q()[j], qm[j * kRank], 1e-4);  // the warm start of the next step
      }
    for (int64_t i = 120; i < n; ++i) EXPECT_EQ(out[i], m[i]);  // the bias: summed exactly
    // The approximation is rank 2 while M (12 x 10, random) is not: something was missed.
    double missed = 0;
    for (int i = 0; i < 120; ++i) missed += std::fabs(m[i] - out[i]);
    EXPECT_GT(missed, 1.0);
  });
}

TEST(PowerSgd, ErrorFeedbackAddsWhatTheLastStepMissed) {
  RunRanks(1, [](Comm c) {
    nn::ParameterStore ps;
    AddParams(&ps);
    const int64_t n = ps.numel();
    PowerSgdOptions o;
    o.rank = 2;
    auto made = PowerSgd::Create(c, ps, 1, o);
    ASSERT_TRUE(made.ok());
    PowerSgd& p = **made;
    std::vector<float> g = Gradient(0, n, 3), out(static_cast<size_t>(n));
    float* slot = g.data();
    ASSERT_TRUE(p.Reduce(&slot, out.data()).ok());
    const std::vector<float> e = p.error(0);
    // A zero gradient next: what is compressed is exactly the carried error.
    std::vector<float> zero(static_cast<size_t>(n), 0.0f), out2(static_cast<size_t>(n));
    slot = zero.data();
    ASSERT_TRUE(p.Reduce(&slot, out2.data()).ok());
    for (int i = 0; i < 120; ++i) EXPECT_EQ(zero[i], e[i]);  // the slot held g + e = e
    double sent = 0;
    for (int i = 0; i < 120; ++i) sent += std::fabs(out2[i]);
    EXPECT_GT(sent, 0.1);
  });
}

TEST(PowerSgd, ARankThatCompressesNothingIsRefused) {
  RunRanks(1, [](Comm c) {
    nn::ParameterStore ps;
    AddParams(&ps);
    PowerSgdOptions o;
    o.rank = 4;  // 4 x 22 > 60
    auto made = PowerSgd::Create(c, ps, 1, o);
    ASSERT_FALSE(made.ok());
    EXPECT_NE(made.status().message().find("powersgd_rank"), std::string::npos);
  });
}

TEST(PowerSgd, DeterministicSlotsGiveTheSameBitsOnOneRankAndOnTwo) {
  // Four canonical slots: one rank holding all four, or two ranks holding two each.
  constexpr int kSlots = 4;
  auto run = [](int world) {
    std::vector<float> result;
    RunRanks(world, [&](Comm c) {
      nn::ParameterStore ps;
      AddParams(&ps);
      const int64_t n = ps.numel();
      const int mine = kSlots / world;
      PowerSgdOptions o;
      o.rank = 2;
      o.deterministic = true;
      o.total_slots = kSlots;
      auto made = PowerSgd::Create(c, ps, mine, o);
      ASSERT_TRUE(made.ok());
      std::vector<std::vector<float>> g;
      std::vector<float*> slots;
      std::vector<float> out(static_cast<size_t>(n));
      for (int step = 0; step < 3; ++step) {
        g.clear();
        for (int k = 0; k < mine; ++k) g.push_back(Gradient(c->rank() * mine + k, n, 10 + step));
        slots.clear();
        for (auto& v : g) slots.push_back(v.data());
        ASSERT_TRUE((*made)->Reduce(slots.data(), out.data()).ok());
      }
      if (c->rank() == 0) result = out;
    });
    return result;
  };
  const std::vector<float> one = run(1), two = run(2);
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) ASSERT_EQ(one[i], two[i]) << i;
}

TEST(DilocoSync, TheOuterStepIsNesterovOnTheAveragedChangeAndEveryReplicaGetsTheAnchor) {
  RunRanks(2, [](Comm c) {
    nn::ParameterStore ps;
    AddParams(&ps);
    DilocoOptions o;
    o.inner_steps = 2;
    o.outer_lr = 0.5;
    o.outer_momentum = 0.9;
    auto made = DilocoSync::Create(c, ps, o);
    ASSERT_TRUE(made.ok());
    DilocoSync& d = **made;
    std::vector<float> start(static_cast<size_t>(ps.numel()), 1.0f), theta = start;
    d.Reset(theta.data());
    // Inner steps move replica r's parameters by -(r + 1) * 0.25 per step.
    for (int64_t step = 0; step < 4; ++step) {
      for (float& v : theta) v -= static_cast<float>(c->rank() + 1) * 0.25f;
      auto synced = d.AfterStep(step, false, theta.data());
      ASSERT_TRUE(synced.ok());
      EXPECT_EQ(*synced, step % 2 == 1 ? 1 : 0);
    }
    // Window 1: delta = mean(0.5, 1.0) = 0.75; buf = 0.75; update = 0.75 + 0.9 * 0.75 = 1.425;
    // anchor = 1 - 0.5 * 1.425 = 0.2875. Window 2: the same delta; buf = 0.9 * 0.75 + 0.75 =
    // 1.425; update = 0.75 + 0.9 * 1.425 = 2.0325; anchor = 0.2875 - 1.01625 = -0.72875.
    const float buf1 = 0.75f, upd1 = 0.75f + 0.9f * buf1, a1 = 1.0f - 0.5f * upd1;
    const float buf2 = 0.9f * buf1 + 0.75f, upd2 = 0.75f + 0.9f * buf2, a2 = a1 - 0.5f * upd2;
    for (size_t i = 0; i < theta.size(); ++i) {
      EXPECT_FLOAT_EQ(theta[i], a2);
      EXPECT_FLOAT_EQ(d.momentum()[i], buf2);
    }
  });
}

TEST(DilocoSync, FragmentsSyncInTurnAndTheLastStepSyncsThemAll) {
  RunRanks(1, [](Comm c) {
    nn::ParameterStore ps;
    ps.Add("a", {40}, nn::Init::Zeros(), false);
    ps.Add("b", {40}, nn::Init::Zeros(), false);
    ps.Add("c", {40}, nn::Init::Zeros(), false);
    ps.Add("d", {40}, nn::Init::Zeros(), false);
    ps.Allocate();
    DilocoOptions o;
    o.inner_steps = 4;
    o.fragments = 2;
    auto made = DilocoSync::Create(c, ps, o);
    ASSERT_TRUE(made.ok());
    DilocoSync& d = **made;
    EXPECT_EQ(d.fragment_begin(1), 80);
    std::vector<bool> f0, f1;
    for (int64_t s = 0; s < 8; ++s) {
      f0.push_back(d.Due(0, s));
      f1.push_back(d.Due(1, s));
    }
    EXPECT_EQ(f0, (std::vector<bool>{false, true, false, false, false, true, false, false}));
    EXPECT_EQ(f1, (std::vector<bool>{false, false, false, true, false, false, false, true}));
    std::vector<float> theta(160, 0.0f);
    auto synced = d.AfterStep(0, /*last=*/true, theta.data());
    ASSERT_TRUE(synced.ok());
    EXPECT_EQ(*synced, 2);
    o.fragments = 5;  // more than the parameters
    EXPECT_FALSE(DilocoSync::Create(c, ps, o).ok());
  });
}

// Overlap (Streaming DiLoCo's tau = 1, alpha = 0.5): the exchange started after step 1 lands
// after step 2, when each replica has moved on; its parameters become the mean of where it is
// and the new anchor. The last step then synchronises everything: one model again.
TEST(DilocoSync, AnOverlappedExchangeLandsTauStepsLaterAndMergesWithTheReplica) {
  RunRanks(2, [](Comm c) {
    nn::ParameterStore ps;
    AddParams(&ps);
    DilocoOptions o;
    o.inner_steps = 2;
    o.outer_lr = 0.5;
    o.outer_momentum = 0.9;
    o.overlap_steps = 1;
    o.merge_alpha = 0.5;
    auto made = DilocoSync::Create(c, ps, o);
    ASSERT_TRUE(made.ok());
    DilocoSync& d = **made;
    std::vector<float> theta(static_cast<size_t>(ps.numel()), 1.0f);
    d.Reset(theta.data());
    const float step = static_cast<float>(c->rank() + 1) * 0.25f;  // replica r's inner move
    for (int64_t s = 0; s < 3; ++s) {
      for (float& v : theta) v -= step;
      auto synced = d.AfterStep(s, false, theta.data());
      ASSERT_TRUE(synced.ok());
      EXPECT_EQ(*synced, s == 2 ? 1 : 0) << "step " << s;  // sent after step 1, landed after 2
    }
    // Sent after step 1: delta = mean(0.5, 1.0) = 0.75; buf = 0.75; update = 1.425; anchor =
    // 1 - 0.5 * 1.425 = 0.2875. Replica r is at 1 - 3 * step when it lands.
    const float anchor = 1.0f - 0.5f * (0.75f + 0.9f * 0.75f);
    const float merged = 0.5f * (1.0f - 3 * step) + 0.5f * anchor;
    for (size_t i = 0; i < theta.size(); ++i) {
      EXPECT_FLOAT_EQ(d.anchor()[i], anchor);
      EXPECT_FLOAT_EQ(theta[i], merged);
      EXPECT_FLOAT_EQ(d.pending()[i], static_cast<float>(c->rank() + 1) * 0.5f);  // what it sent
    }
    auto synced = d.AfterStep(3, /*last=*/true, theta.data());
    ASSERT_TRUE(synced.ok());
    EXPECT_EQ(*synced, 1);
    // Every replica holds its anchor, which the same averaged delta made the same everywhere.
    float first_anchor = d.anchor()[0];
    ASSERT_TRUE(c->Broadcast(&first_anchor, 1, comm::DType::kF32, 0)->Wait().ok());
    EXPECT_EQ(d.anchor()[0], first_anchor);
    for (size_t i = 0; i < theta.size(); ++i) EXPECT_EQ(theta[i], d.anchor()[i]);
  });
}

TEST(DilocoSync, AnOverlapOfHOrMoreStepsIsRefused) {
  RunRanks(1, [](Comm c) {
    nn::ParameterStore ps;
    AddParams(&ps);
    DilocoOptions o;
    o.inner_steps = 4;
    o.overlap_steps = 4;
    auto made = DilocoSync::Create(c, ps, o);
    ASSERT_FALSE(made.ok());
    EXPECT_NE(made.status().message().find("train.diloco_overlap_steps = 4: expected 0 to diloco_inner_steps - 1 = 3"),
              std::string::npos)
        << made.status().message();
  });
}

TEST(DilocoSync, ANonFiniteOuterGradientStopsBeforeAnythingChanges) {
  RunRanks(2, [](Comm c) {
    nn::ParameterStore ps;
    AddParams(&ps);
    auto made = DilocoSync::Create(c, ps, DilocoOptions{});
    ASSERT_TRUE(made.ok());
    std::vector<float> theta(static_cast<size_t>(ps.numel()), 1.0f);
    (*made)->Reset(theta.data());
    if (c->rank() == 1) theta[3] = NAN;
    auto synced = (*made)->AfterStep(0, true, theta.data());
    ASSERT_FALSE(synced.ok());
    EXPECT_EQ(synced.status().code(), StatusCode::kNonFinite);
    EXPECT_EQ((*made)->anchor()[0], 1.0f);
  });
}

}  // namespace
}  // namespace lockstep::parallel
