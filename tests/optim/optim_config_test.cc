#include "lockstep/optim/optim_config.h"

#include <gtest/gtest.h>

namespace lockstep::optim {
namespace {

Result<OptimConfig> Read(const std::string& toml, int64_t steps = 100) {
  auto c = Config::Parse(toml, "test.toml");
  if (!c.ok()) return c.status();
  auto r = ReadOptimConfig(*c, steps);
  // Every key the TOML sets must have been read: a key the optimizer ignores would be unread.
  if (r.ok() && !c->UnreadKeys().empty()) return Status::InvalidArgument("unread key " + c->UnreadKeys()[0]);
  return r;
}

TEST(OptimConfig, DefaultsMirrorTorch) {
  auto r = Read("[optim]\nlr = 2e-3\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->kind, OptimizerKind::kAdamW);
  EXPECT_EQ(r->adamw.beta1, 0.9);
  EXPECT_EQ(r->adamw.beta2, 0.999);
  EXPECT_EQ(r->adamw.eps, 1e-8);
  EXPECT_EQ(r->adamw.weight_decay, 0.01);
  EXPECT_EQ(r->schedule.kind, LrScheduleKind::kConstant);
  EXPECT_EQ(r->schedule.lr, 2e-3);
  EXPECT_EQ(r->grad_clip, 0.0);
}

TEST(OptimConfig, CosineAndSgdKeys) {
  auto r = Read(
      "[optim]\nname = \"sgd\"\nlr = 0.1\nmomentum = 0.9\nnesterov = true\nschedule = \"cosine\"\n"
      "warmup_steps = 5\ngrad_clip = 1.0\n",
      300);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->kind, OptimizerKind::kSgd);
  EXPECT_EQ(r->sgd.momentum, 0.9);
  EXPECT_TRUE(r->sgd.nesterov);
  EXPECT_EQ(r->sgd.weight_decay, 0.0);
  EXPECT_EQ(r->schedule.kind, LrScheduleKind::kCosine);
  EXPECT_EQ(r->schedule.total_steps, 300);
  EXPECT_DOUBLE_EQ(r->schedule.min_lr, 0.01);
  EXPECT_EQ(r->schedule.warmup_steps, 5);
  EXPECT_EQ(r->grad_clip, 1.0);
}

TEST(OptimConfig, ErrorsNameTheKey) {
  struct Case {
    const char* toml;
    const char* key;
  } cases[] = {
      {"[optim]\nname = \"adam\"\n", "optim.name"},
      {"[optim]\nbeta1 = 1.5\n", "optim.beta1"},
      {"[optim]\nschedule = \"linear\"\n", "optim.schedule"},
      {"[optim]\ngrad_clip = -1.0\n", "optim.grad_clip"},
      {"[optim]\nlr = \"fast\"\n", "optim.lr"},
      {"[optim]\nmomentum = 0.9\n", "optim.momentum"},  // an sgd key under adamw: unknown
  };
  for (const Case& c : cases) {
    auto r = Read(c.toml);
    ASSERT_FALSE(r.ok()) << c.toml;
    EXPECT_NE(r.status().ToString().find(c.key), std::string::npos) << r.status().ToString();
  }
}

}  // namespace
}  // namespace lockstep::optim
