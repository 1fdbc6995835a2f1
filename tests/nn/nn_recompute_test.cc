// Activation recompute (autograd/recompute.h) on a stack of pre-LayerNorm MLP blocks built from
// nn's real layers: the loss, every parameter gradient and the input gradient are bit for bit
// those of running the blocks directly; the gradient-ready hook fires once per parameter; and
// after the forward pass the tape's pool holds about one block's activations instead of all.
#include "lockstep/autograd/recompute.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <vector>

#include "lockstep/nn/activation.h"
#include "lockstep/nn/cross_entropy.h"
#include "lockstep/nn/layer_norm.h"
#include "lockstep/nn/linear.h"
#include "lockstep/nn/parameter_store.h"
#include "lockstep/nn/shape_ops.h"

namespace lockstep::nn {
namespace {

using autograd::Tape;
using autograd::Variable;

constexpr int64_t kRows = 64, kWidth = 32, kBlocks = 4;

struct Blocks {
  ParameterStore ps;
  struct Ids {
    int ln_w, ln_b, fc_w, fc_b, fc2_w, fc2_b;
  };
  std::vector<Ids> ids;

  Blocks() {
    for (int l = 0; l < kBlocks; ++l) {
      std::string p = "b";  // built in steps: GCC 12 warns -Wrestrict on "b" + to_string(l) + "."
      p += std::to_string(l);
      p += '.';
      Ids i;
      i.ln_w = ps.Add(p + "ln.w", {kWidth}, Init::Ones(), false);
      i.ln_b = ps.Add(p + "ln.b", {kWidth}, Init::Normal(0.1f), false);
      i.fc_w = ps.Add(p + "fc.w", {4 * kWidth, kWidth}, Init::Normal(0.2f), true);
      i.fc_b = ps.Add(p + "fc.b", {4 * kWidth}, Init::Normal(0.1f), false);
      i.fc2_w = ps.Add(p + "fc2.w", {kWidth, 4 * kWidth}, Init::Normal(0.2f), true);
      i.fc2_b = ps.Add(p + "fc2.b", {kWidth}, Init::Normal(0.1f), false);
      ids.push_back(i);
    }
    ps.Finalize(/*init_seed=*/7);
  }

  Variable Block(Tape& tape, const Ids& i, const Variable& x) const {
    Variable h = LayerNormForward(tape, x, ps.var(i.ln_w), ps.var(i.ln_b));
    Variable u = GeluForward(tape, LinearForward(tape, h, ps.var(i.fc_w), ps.var(i.fc_b)));
    return AddForward(tape, x, LinearForward(tape, u, ps.var(i.fc2_w), ps.var(i.fc2_b)));
  }
};

struct Outcome {
  float loss = 0;
  std::vector<float> grads, input_grad;
  std::map<int, int> ready;  // parameter -> times the hook fired
  int64_t pool_after_forward = 0;
};

Outcome TrainStep(Blocks& m, bool recompute) {
  std::memset(m.ps.flat_grads(), 0, static_cast<size_t>(m.ps.numel()) * sizeof(float));
  Tape tape;
  Outcome o;
  tape.SetParamReadyHook([&](int p) { ++o.ready[p]; });
  tape.DeclareParams(m.ps.size());
  Variable x = tape.NewActivation({kRows, kWidth}, /*requires_grad=*/true);
  for (int64_t k = 0; k < x.numel(); ++k) x.data()[k] = static_cast<float>((k * 37) % 23) / 11.0f - 1.0f;
  Variable h = x;
  for (const Blocks::Ids& i : m.ids) {
    if (recompute) {
      std::vector<Variable> params;
      for (int p : {i.ln_w, i.ln_b, i.fc_w, i.fc_b, i.fc2_w, i.fc2_b}) params.push_back(m.ps.var(p));
      h = autograd::Recompute(tape, h, params, [&m, &i](Tape& t, const Variable& in) { return m.Block(t, i, in); });
    } else {
      h = m.Block(tape, i, h);
    }
  }
  tensor::Tensor targets = tape.NewBuffer({kRows}, tensor::DType::kI32);
  for (int64_t r = 0; r < kRows; ++r) targets.data<int32_t>()[r] = static_cast<int32_t>((r * 5) % kWidth);
  Variable loss = SoftmaxCrossEntropyForward(tape, h, targets);
  o.pool_after_forward = tape.pool().bytes_held();
  o.loss = loss.data()[0];
  tape.Backward(loss, 1.0f);
  o.grads.assign(m.ps.flat_grads(), m.ps.flat_grads() + m.ps.numel());
  o.input_grad.assign(x.grad_data(), x.grad_data() + x.numel());
  return o;
}

TEST(Recompute, GradientsAreBitForBitThoseOfTheDirectRun) {
  Blocks m;
  const Outcome direct = TrainStep(m, false);
  const Outcome again = TrainStep(m, true);
  EXPECT_EQ(std::memcmp(&direct.loss, &again.loss, sizeof(float)), 0);
  ASSERT_EQ(direct.grads.size(), again.grads.size());
  EXPECT_EQ(std::memcmp(direct.grads.data(), again.grads.data(), direct.grads.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(direct.input_grad.data(), again.input_grad.data(), direct.input_grad.size() * sizeof(float)),
            0);
  double norm = 0;
  for (float g : again.grads) norm += static_cast<double>(g) * g;
  EXPECT_GT(norm, 0.0);  // the comparison is not between two zero vectors
}

TEST(Recompute, EveryParameterIsReportedReadyOnce) {
  Blocks m;
  const Outcome o = TrainStep(m, true);
  ASSERT_EQ(static_cast<int>(o.ready.size()), m.ps.size());
  for (const auto& [p, n] : o.ready) EXPECT_EQ(n, 1) << "parameter " << p;
}

TEST(Recompute, KeepsAboutOneBlockOfActivations) {
  Blocks m;
  const Outcome direct = TrainStep(m, false);
  const Outcome again = TrainStep(m, true);
  // Direct: every block's LayerNorm statistics, hidden layer (4x wide) and GELU are saved;
  // recompute: the block inputs plus one block's transient buffers, reused by the next block.
  EXPECT_LT(again.pool_after_forward, direct.pool_after_forward / 2)
      << again.pool_after_forward << " vs " << direct.pool_after_forward;
}

TEST(Recompute, WithoutGradientsItIsTheFunctionItself) {
  Blocks m;
  Tape tape;
  Tape::NoGradGuard no_grad(tape);
  Variable x = tape.NewActivation({kRows, kWidth}, false);
  for (int64_t k = 0; k < x.numel(); ++k) x.data()[k] = 0.01f * static_cast<float>(k % 17);
  Variable a = m.Block(tape, m.ids[0], x);
  Variable b = autograd::Recompute(tape, x, {}, [&m](Tape& t, const Variable& in) { return m.Block(t, m.ids[0], in); });
  EXPECT_EQ(std::memcmp(a.data(), b.data(), static_cast<size_t>(a.numel()) * sizeof(float)), 0);
  EXPECT_EQ(tape.num_ops(), 0);
}

}  // namespace
}  // namespace lockstep::nn
