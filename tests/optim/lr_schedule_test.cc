#include "lockstep/optim/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

namespace lockstep::optim {
namespace {

LrScheduleOptions Cosine() {
  LrScheduleOptions o;
  o.kind = LrScheduleKind::kCosine;
  o.lr = 1e-3;
  o.min_lr = 1e-4;
  o.warmup_steps = 10;
  o.total_steps = 110;
  return o;
}

TEST(LrSchedule, WarmupThenCosineAtKeySteps) {
  auto s = LrSchedule::Create(Cosine());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  // Warmup: lr*(step+1)/10.
  EXPECT_FLOAT_EQ(s->LrAt(0), 1e-4f);
  EXPECT_FLOAT_EQ(s->LrAt(4), 5e-4f);
  EXPECT_FLOAT_EQ(s->LrAt(9), 1e-3f);
  // Cosine over steps 10..110: ratio 0 -> lr; 0.25 -> min + 0.5*(1+cos(pi/4))*(lr-min)
  // = 1e-4 + 0.8535534*9e-4 = 8.681981e-4; 0.5 -> midpoint 5.5e-4; 1 -> min_lr.
  EXPECT_FLOAT_EQ(s->LrAt(10), 1e-3f);
  EXPECT_FLOAT_EQ(s->LrAt(35), 8.681980515339464e-4f);
  EXPECT_FLOAT_EQ(s->LrAt(60), 5.5e-4f);
  EXPECT_FLOAT_EQ(s->LrAt(110), 1e-4f);
  EXPECT_FLOAT_EQ(s->LrAt(200), 1e-4f);  // past the plan: stays at min_lr
  for (int64_t step = 10; step < 110; ++step) EXPECT_GE(s->LrAt(step), s->LrAt(step + 1));
}

TEST(LrSchedule, ConstantWithAndWithoutWarmup) {
  LrScheduleOptions o;
  o.kind = LrScheduleKind::kConstant;
  o.lr = 2e-3;
  auto flat = LrSchedule::Create(o);
  ASSERT_TRUE(flat.ok());
  EXPECT_FLOAT_EQ(flat->LrAt(0), 2e-3f);
  EXPECT_FLOAT_EQ(flat->LrAt(123456), 2e-3f);
  o.warmup_steps = 4;
  auto warm = LrSchedule::Create(o);
  ASSERT_TRUE(warm.ok());
  EXPECT_FLOAT_EQ(warm->LrAt(0), 5e-4f);
  EXPECT_FLOAT_EQ(warm->LrAt(3), 2e-3f);
  EXPECT_FLOAT_EQ(warm->LrAt(4), 2e-3f);
}

TEST(LrSchedule, CosineWithoutWarmupStartsAtPeak) {
  LrScheduleOptions o = Cosine();
  o.warmup_steps = 0;
  o.min_lr = 0;
  o.total_steps = 4;
  auto s = LrSchedule::Create(o);
  ASSERT_TRUE(s.ok());
  EXPECT_FLOAT_EQ(s->LrAt(0), 1e-3f);
  EXPECT_FLOAT_EQ(s->LrAt(2), 5e-4f);  // cos(pi/2) = 0
  EXPECT_NEAR(s->LrAt(3), 1e-3 * 0.5 * (1 + std::cos(0.75 * M_PI)), 1e-10);
  EXPECT_FLOAT_EQ(s->LrAt(4), 0.0f);
}

// A run shorter than its warmup (a smoke test with --steps 3) only warms up.
TEST(LrSchedule, RunShorterThanWarmupOnlyWarmsUp) {
  LrScheduleOptions o = Cosine();
  o.warmup_steps = 110;
  auto s = LrSchedule::Create(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_FLOAT_EQ(s->LrAt(0), static_cast<float>(o.lr / 110));
  EXPECT_FLOAT_EQ(s->LrAt(54), static_cast<float>(o.lr * 55 / 110));
}

TEST(LrSchedule, ValidationNamesTheKey) {
  LrScheduleOptions o = Cosine();
  o.warmup_steps = -1;
  auto r = LrSchedule::Create(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("optim.warmup_steps"), std::string::npos);
  o = Cosine();
  o.min_lr = 1.0;
  r = LrSchedule::Create(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("optim.min_lr"), std::string::npos);
  o = Cosine();
  o.lr = 0;
  EXPECT_EQ(LrSchedule::Create(o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lockstep::optim
