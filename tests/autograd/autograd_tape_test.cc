// Tape and backward engine: accumulation through shared sub-expressions, the
// gradient-ready hook (once per parameter, only when final, unused ones at the end),
// grad_scale seeding, no-grad mode, and buffer reuse across steps.
#include "lockstep/autograd/tape.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

namespace lockstep::autograd {
namespace {

using tensor::Tensor;

// Minimal elementwise ops written against the public Tape API, as nn/ does.
Variable Mul(Tape& tape, const Variable& a, const Variable& b) {
  const bool rec = tape.ShouldRecord({&a, &b});
  Variable out = tape.NewActivation(a.shape(), rec);
  for (int64_t i = 0; i < a.numel(); ++i) out.data()[i] = a.data()[i] * b.data()[i];
  if (rec) {
    tape.Record({a, b}, [out, a, b] {
      if (!out.has_grad()) return;
      const float* d = out.grad_data();
      if (a.requires_grad()) {
        float* g = a.GradAccumulate();
        for (int64_t i = 0; i < a.numel(); ++i) g[i] += d[i] * b.data()[i];
      }
      if (b.requires_grad()) {
        float* g = b.GradAccumulate();
        for (int64_t i = 0; i < b.numel(); ++i) g[i] += d[i] * a.data()[i];
      }
    });
  }
  return out;
}

Variable Sum(Tape& tape, const Variable& a) {
  const bool rec = tape.ShouldRecord({&a});
  Variable out = tape.NewActivation({1}, rec);
  float s = 0.0f;
  for (int64_t i = 0; i < a.numel(); ++i) s += a.data()[i];
  out.data()[0] = s;
  if (rec) {
    tape.Record({a}, [out, a] {
      if (!out.has_grad()) return;
      float* g = a.GradAccumulate();
      for (int64_t i = 0; i < a.numel(); ++i) g[i] += out.grad_data()[0];
    });
  }
  return out;
}

// Parameters as views into one flat value buffer and one flat gradient buffer.
struct Params {
  explicit Params(const std::vector<std::vector<float>>& init) {
    int64_t total = 0;
    for (const auto& v : init) total += static_cast<int64_t>(v.size());
    values = Tensor::Zeros({total}, tensor::DType::kF32, tensor::MemoryTag::kParameter);
    grads = Tensor::Zeros({total}, tensor::DType::kF32, tensor::MemoryTag::kGradient);
    int64_t off = 0;
    for (size_t i = 0; i < init.size(); ++i) {
      const int64_t n = static_cast<int64_t>(init[i].size());
      Tensor v = Tensor::FromStorage(values.storage(), off, {n});
      for (int64_t j = 0; j < n; ++j) v.data<float>()[j] = init[i][j];
      vars.push_back(Variable::Parameter(v, Tensor::FromStorage(grads.storage(), off, {n}), static_cast<int>(i)));
      off += n;
    }
  }
  std::vector<float> Grad(int i) const { return vars[i].grad().ToVector(); }
  Tensor values, grads;
  std::vector<Variable> vars;
};

TEST(Tape, SharedSubexpressionAccumulates) {
  // y = x * w;  L = sum(y * y + y * w) = sum(x^2 w^2 + x w^2)
  // dL/dw = 2 x^2 w + 2 x w;  dL/dx would be 2 x w^2 + w^2 (x is a constant here).
  Params p({{1.5f, -2.0f, 0.5f}});
  const Variable& w = p.vars[0];
  Variable x = Variable::Constant(Tensor::FromVector({3}, {2.0f, 3.0f, -1.0f}));
  Tape tape;
  Variable y = Mul(tape, x, w);
  Variable l1 = Sum(tape, Mul(tape, y, y));
  Variable l2 = Sum(tape, Mul(tape, y, w));
  // Sum the two partial losses with a 2-element trick: L = l1 + l2 through a shared op.
  Variable both = tape.NewActivation({2}, true);
  both.data()[0] = l1.data()[0];
  both.data()[1] = l2.data()[0];
  tape.Record({l1, l2}, [both, l1, l2] {
    l1.GradAccumulate()[0] += both.grad_data()[0];
    l2.GradAccumulate()[0] += both.grad_data()[1];
  });
  Variable loss = Sum(tape, both);
  const std::vector<float> xs = {2.0f, 3.0f, -1.0f}, ws = {1.5f, -2.0f, 0.5f};
  float expect_loss = 0.0f;
  for (int i = 0; i < 3; ++i) {
    expect_loss += xs[i] * xs[i] * ws[i] * ws[i] + xs[i] * ws[i] * ws[i];
  }
  EXPECT_FLOAT_EQ(loss.data()[0], expect_loss);
  tape.Backward(loss, 1.0f);
  std::vector<float> g = p.Grad(0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FLOAT_EQ(g[i], 2 * xs[i] * xs[i] * ws[i] + 2 * xs[i] * ws[i]) << i;
  }
  EXPECT_EQ(tape.num_ops(), 0);  // released by Backward
}

TEST(Tape, GradScaleSeedsAndParamGradsAccumulateAcrossSteps) {
  Params p({{3.0f, 4.0f}});
  Variable x = Variable::Constant(Tensor::FromVector({2}, {5.0f, 7.0f}));
  Tape tape;
  tape.Backward(Sum(tape, Mul(tape, x, p.vars[0])), 0.5f);
  EXPECT_EQ(p.Grad(0), (std::vector<float>{2.5f, 3.5f}));
  // A second micro-step adds on top (gradient accumulation); ZeroGrad is the caller's.
  tape.Backward(Sum(tape, Mul(tape, x, p.vars[0])), 0.25f);
  EXPECT_EQ(p.Grad(0), (std::vector<float>{3.75f, 5.25f}));
}

TEST(Tape, HookFiresOncePerParamWhenFinal) {
  // p0 is used by three ops (first, middle, last): tied weights. p1 is used once, early;
  // p2 is never used; p3 once, late. Every param must fire exactly once, with a gradient
  // that already equals its final value.
  Params p({{1.0f, 2.0f}, {0.5f, -1.0f}, {9.0f, 9.0f}, {3.0f, -2.0f}});
  Variable x = Variable::Constant(Tensor::FromVector({2}, {1.5f, -0.5f}));
  Tape tape;
  std::map<int, int> fired;
  std::map<int, std::vector<float>> at_hook;
  std::vector<int> order;
  tape.SetParamReadyHook([&](int i) {
    ++fired[i];
    order.push_back(i);
    at_hook[i] = p.Grad(i);
  });
  tape.DeclareParams(4);
  Variable h = Mul(tape, x, p.vars[0]);  // op 0: p0
  h = Mul(tape, h, p.vars[1]);           // op 1: p1
  h = Mul(tape, h, p.vars[0]);           // op 2: p0
  h = Mul(tape, h, p.vars[3]);           // op 3: p3
  h = Mul(tape, h, p.vars[0]);           // op 4: p0
  tape.Backward(Sum(tape, h), 1.0f);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(fired[i], 1) << "param " << i;
    EXPECT_EQ(at_hook[i], p.Grad(i)) << "param " << i << " not final when its hook fired";
  }
  // Reverse op order: p3 (op 3), then p1 (op 1), then p0 after its first use (op 0);
  // the unused p2 comes last.
  EXPECT_EQ(order, (std::vector<int>{3, 1, 0, 2}));
  EXPECT_EQ(tape.UnusedParams(), (std::vector<int>{2}));
  // Gradients are right too: L = sum(x * p0^3 * p1 * p3).
  std::vector<float> g0 = p.Grad(0);
  EXPECT_FLOAT_EQ(g0[0], 1.5f * 3 * 1.0f * 0.5f * 3.0f);
  EXPECT_FLOAT_EQ(g0[1], -0.5f * 3 * 4.0f * -1.0f * -2.0f);
  EXPECT_EQ(p.Grad(2), (std::vector<float>{0.0f, 0.0f}));
}

TEST(Tape, EveryDeclaredParamReportedEvenWithoutOps) {
  Params p({{1.0f}, {2.0f}});
  Tape tape;
  std::vector<int> order;
  tape.SetParamReadyHook([&](int i) { order.push_back(i); });
  tape.DeclareParams(3);  // includes one the tape never sees
  Variable c = Variable::Constant(Tensor::FromVector({1}, {1.0f}));
  Variable loss = Sum(tape, c);  // does not require grad: nothing recorded
  EXPECT_FALSE(loss.requires_grad());
  EXPECT_EQ(tape.num_ops(), 0);
  tape.Backward(loss, 1.0f);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(tape.UnusedParams(), (std::vector<int>{0, 1, 2}));
  // Next step: counts start from scratch.
  order.clear();
  tape.Backward(Sum(tape, Mul(tape, c, p.vars[1])), 1.0f);
  EXPECT_EQ(order, (std::vector<int>{1, 0, 2}));
  EXPECT_EQ(tape.UnusedParams(), (std::vector<int>{0, 2}));
}

TEST(Tape, ClearWithoutBackwardResetsCounts) {
  Params p(std::vector<std::vector<float>>{{1.0f}});
  Variable c = Variable::Constant(Tensor::FromVector({1}, {2.0f}));
  Tape tape;
  int fired = 0;
  tape.SetParamReadyHook([&](int) { ++fired; });
  Sum(tape, Mul(tape, c, p.vars[0]));  // abandoned forward
  tape.Clear();
  tape.Backward(Sum(tape, Mul(tape, c, p.vars[0])), 1.0f);
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(p.Grad(0), (std::vector<float>{2.0f}));
}

TEST(Tape, NoGradRecordsNothing) {
  Params p({{1.0f, 2.0f}});
  Variable x = Variable::Constant(Tensor::FromVector({2}, {3.0f, 4.0f}));
  Tape tape;
  {
    Tape::NoGradGuard guard(tape);
    Variable y = Sum(tape, Mul(tape, x, p.vars[0]));
    EXPECT_FLOAT_EQ(y.data()[0], 11.0f);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(tape.num_ops(), 0);
  }
  EXPECT_TRUE(tape.grad_enabled());
  EXPECT_TRUE(tape.ShouldRecord({&p.vars[0]}));
  EXPECT_FALSE(tape.ShouldRecord({&x}));
}

TEST(Variable, GradAllocationAndAdoption) {
  Tape tape;
  Variable a = tape.NewActivation({2, 3}, true);
  EXPECT_FALSE(a.has_grad());
  bool fresh = false;
  a.GradForWrite(&fresh);
  EXPECT_TRUE(fresh);
  a.GradForWrite(&fresh);
  EXPECT_FALSE(fresh);
  Variable b = tape.NewActivation({6}, true);
  Tensor g = a.TakeGrad();
  EXPECT_FALSE(a.has_grad());
  EXPECT_TRUE(b.AdoptGrad(g));
  EXPECT_EQ(b.grad().shape(), tensor::Shape({6}));  // reshaped view of the same buffer
  EXPECT_EQ(b.grad().storage(), g.storage());
  EXPECT_FALSE(b.AdoptGrad(g));  // already has one
  Variable z = tape.NewActivation({3}, true);
  float* zg = z.GradAccumulate();
  EXPECT_EQ(zg[0], 0.0f);
  EXPECT_EQ(zg[2], 0.0f);
  Params p(std::vector<std::vector<float>>{{1.0f}});
  EXPECT_FALSE(p.vars[0].AdoptGrad(Tensor::Zeros({1})));  // parameters keep their view
}

TEST(BufferPool, ReusesBuffersAcrossStepsButNeverSharedOnes) {
  BufferPool pool;
  Tensor a = pool.Empty({256});
  Tensor b = pool.Empty({256});
  const void* pa = a.raw();
  const void* pb = b.raw();
  Tensor keep = b;  // someone outside still holds b
  a = Tensor();
  b = Tensor();
  pool.Recycle();
  Tensor c = pool.Empty({16, 16});  // same byte size as a
  EXPECT_EQ(c.raw(), pa);
  Tensor d = pool.Empty({256});
  EXPECT_NE(d.raw(), pb);  // b is still in use by `keep`: not handed out while it is
  EXPECT_EQ(keep.raw(), pb);
  EXPECT_EQ(pool.reuses(), 1);
  EXPECT_EQ(pool.allocations(), 3);
  // Free buffers nobody asked for during a whole step are released.
  c = Tensor();
  d = Tensor();
  pool.Recycle();  // c, d free; b still in use
  EXPECT_EQ(pool.bytes_held(), 3 * 256 * 4);
  pool.Recycle();  // not reused in between: released
  EXPECT_EQ(pool.bytes_held(), 256 * 4);  // b, still held by `keep`
  // Once its outside owner lets go, b is handed out again instead of a new allocation.
  keep = Tensor();
  Tensor e = pool.Empty({256});
  EXPECT_EQ(e.raw(), pb);
  EXPECT_EQ(pool.allocations(), 3);
}

TEST(BufferPool, TapeStepsReuseActivations) {
  Params p({{1.0f, 2.0f, 3.0f, 4.0f}});
  Variable x = Variable::Constant(Tensor::FromVector({4}, {1.0f, 1.0f, 1.0f, 1.0f}));
  Tape tape;
  for (int step = 0; step < 3; ++step) {
    Variable loss = Sum(tape, Mul(tape, Mul(tape, x, p.vars[0]), p.vars[0]));
    tape.Backward(loss, 1.0f);
  }
  // Step 1 allocates; steps 2 and 3 reuse everything, the loss buffers the caller held while
  // Backward recycled too (the pool keeps them until the caller lets go).
  EXPECT_GT(tape.pool().reuses(), 0);
  const int64_t after_three = tape.pool().allocations();
  Variable loss = Sum(tape, Mul(tape, Mul(tape, x, p.vars[0]), p.vars[0]));
  tape.Backward(loss, 1.0f);
  EXPECT_EQ(tape.pool().allocations(), after_three);
}

}  // namespace
}  // namespace lockstep::autograd
