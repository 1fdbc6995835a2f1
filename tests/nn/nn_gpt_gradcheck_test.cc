// Gpt, whole model: the engine's loss and every parameter's analytic gradient against
// the double-precision reference (tests/nn/reference_util.cc, written from the PyTorch
// peer) and its central finite differences, on a small config (2 layers, width 16,
// 2 heads, context 8, batch 2). Its own binary to stay within the per-binary time budget
// under sanitizers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "lockstep/core/rng.h"
#include "lockstep/nn/gpt.h"
#include "lockstep/tensor/threads.h"
#include "nn/gpt_fixture.h"
#include "nn/grad_check.h"
#include "nn/reference.h"

namespace lockstep::nn {
namespace {

using autograd::Tape;
using autograd::Variable;
using testing::Batch;
using testing::RandomBatch;
using testing::Randomize;
using testing::RandomVector;
using testing::SmallConfig;

TEST(Gpt, WholeModelGradientsMatchFiniteDifferences) {
  tensor::ScopedComputeThreads one(1);
  const GptConfig c = SmallConfig();
  Gpt gpt(c);
  EXPECT_EQ(gpt.params().numel(), GptParamCount(c));
  Randomize(gpt.params(), 17);
  Batch batch = RandomBatch(2, 8, c.vocab, 5);
  batch.targets[3] = -1;  // an ignored position
  Tape tape;
  Variable loss = gpt.Loss(tape, batch.input());
  ref::Params p = ref::FromStore(gpt.params());
  auto f = [&] { return ref::GptLoss(c, p, batch.tokens, batch.targets, 2, 8); };
  const double ref_loss = f();
  std::printf("small gpt loss: engine %.7f reference %.7f\n", loss.data()[0], ref_loss);
  EXPECT_NEAR(loss.data()[0], ref_loss, 2e-5 * std::fabs(ref_loss));
  gpt.params().ZeroGrad();
  tape.Backward(loss, 1.0f);
  std::vector<testing::Checked> checked;
  for (const ParamInfo& info : gpt.params()) {
    checked.push_back({info.name, &p[info.name], gpt.params().grad(gpt.params().Find(info.name)).ToVector()});
  }
  testing::ExpectGradientsMatch(checked, f, {.coords = 30});

  // A shorter sequence than the context (positions 0..4 only).
  Batch shorter = RandomBatch(3, 5, c.vocab, 6);
  Variable l2 = gpt.Loss(tape, shorter.input());
  EXPECT_NEAR(l2.data()[0], ref::GptLoss(c, p, shorter.tokens, shorter.targets, 3, 5), 1e-4);
  tape.Clear();
}

}  // namespace
}  // namespace lockstep::nn
