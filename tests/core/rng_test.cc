#include "lockstep/core/rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace lockstep {
namespace {

// Known-answer values from the Random123 distribution (kat_vectors, philox4x32_10).
TEST(Philox, KnownAnswerZero) {
  auto w = Philox4x32(0, 0, 0);
  EXPECT_EQ(w[0], 0x6627e8d5u);
  EXPECT_EQ(w[1], 0xe169c58du);
  EXPECT_EQ(w[2], 0xbc57ac4cu);
  EXPECT_EQ(w[3], 0x9b00dbd8u);
}

TEST(Philox, KnownAnswerOnes) {
  // ctr = ffffffff x4, key = ffffffff x2.
  auto w = Philox4x32(~0ull, ~0ull, ~0ull);
  EXPECT_EQ(w[0], 0x408f276du);
  EXPECT_EQ(w[1], 0x41c83b0eu);
  EXPECT_EQ(w[2], 0xa20bc7c6u);
  EXPECT_EQ(w[3], 0x6d5451fdu);
}

TEST(Rng, CounterAddressesValues) {
  Rng a(42, 7);
  std::vector<uint32_t> seq;
  for (int i = 0; i < 10; ++i) seq.push_back(a.NextU32());
  Rng b(42, 7, 5);
  EXPECT_EQ(b.NextU32(), seq[5]);
  EXPECT_EQ(a.counter(), 10u);
  Rng other_stream(42, 8);
  EXPECT_NE(other_stream.NextU32(), seq[0]);
}

TEST(Rng, UniformAndNormalMoments) {
  Rng r(1, 0);
  double s = 0, s2 = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    float u = r.Uniform();
    ASSERT_GE(u, 0.f);
    ASSERT_LT(u, 1.f);
    s += u;
  }
  EXPECT_NEAR(s / n, 0.5, 0.005);
  s = 0;
  for (int i = 0; i < n; ++i) {
    double z = r.Normal();
    s += z;
    s2 += z * z;
  }
  EXPECT_NEAR(s / n, 0.0, 0.01);
  EXPECT_NEAR(s2 / n, 1.0, 0.02);
}

TEST(Rng, BelowIsInRangeAndCoversAll) {
  Rng r(3, 1);
  std::vector<int> hist(7, 0);
  for (int i = 0; i < 70000; ++i) {
    uint64_t v = r.Below(7);
    ASSERT_LT(v, 7u);
    hist[v]++;
  }
  for (int h : hist) EXPECT_NEAR(h, 10000, 500);
}

}  // namespace
}  // namespace lockstep
