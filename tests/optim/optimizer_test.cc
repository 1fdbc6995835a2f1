// optim::Optimizer, the one interface the trainer steps: MakeOptimizer gives the optimizer
// optim.kind names, with the state a checkpoint keeps under PyTorch's names, and stepping
// through the interface is stepping the algorithm itself, bit for bit.
#include "lockstep/optim/optimizer.h"

#include <gtest/gtest.h>

#include <vector>

#include "lockstep/optim/adamw.h"
#include "lockstep/optim/optim_config.h"
#include "lockstep/optim/sgd.h"

namespace lockstep::optim {
namespace {

const std::vector<ParamGroupSpan> kGroups = {{0, 6, true}, {6, 4, false}};

TEST(Optimizer, MakesTheKindTheConfigNamesWithItsState) {
  OptimConfig adamw;
  adamw.kind = OptimizerKind::kAdamW;
  auto a = MakeOptimizer(adamw, kGroups, {2, 10});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  std::vector<NamedState> state = (*a)->State();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state[0].kind, "exp_avg");
  EXPECT_EQ(state[1].kind, "exp_avg_sq");
  EXPECT_EQ(state[0].values.size(), 8u);  // the owned range only
  EXPECT_EQ((*a)->owned().begin, 2);

  OptimConfig sgd;
  sgd.kind = OptimizerKind::kSgd;
  auto plain = MakeOptimizer(sgd, kGroups, {0, 10});
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE((*plain)->State().empty());  // no momentum: no state
  sgd.sgd.momentum = 0.9;
  auto momentum = MakeOptimizer(sgd, kGroups, {0, 10});
  ASSERT_TRUE(momentum.ok());
  ASSERT_EQ((*momentum)->State().size(), 1u);
  EXPECT_EQ((*momentum)->State()[0].kind, "momentum");

  sgd.sgd.nesterov = true;
  sgd.sgd.dampening = 0.5;  // PyTorch refuses nesterov with dampening
  EXPECT_EQ(MakeOptimizer(sgd, kGroups, {0, 10}).status().code(), StatusCode::kInvalidArgument);
}

TEST(Optimizer, SteppingThroughTheInterfaceIsTheAlgorithmsStep) {
  OptimConfig config;
  config.kind = OptimizerKind::kAdamW;
  auto through = MakeOptimizer(config, kGroups, {0, 10});
  auto direct = AdamW::Create(config.adamw, kGroups, {0, 10});
  ASSERT_TRUE(through.ok() && direct.ok());
  std::vector<float> p1(10), p2(10), g(10);
  for (int i = 0; i < 10; ++i) {
    p1[i] = p2[i] = 0.1f * static_cast<float>(i) - 0.3f;
    g[i] = 0.05f * static_cast<float>(i * i) - 0.7f;
  }
  for (int s = 0; s < 3; ++s) {
    (*through)->Step(p1.data(), g.data(), 1e-2f, 0.5f, nullptr);
    direct->Step(p2.data(), g.data(), 1e-2f, 0.5f, nullptr);
  }
  EXPECT_EQ(p1, p2);
  EXPECT_EQ((*through)->step(), 3);
  (*through)->set_step(7);
  EXPECT_EQ((*through)->step(), 7);
}

}  // namespace
}  // namespace lockstep::optim
