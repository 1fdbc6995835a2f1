// MseLossForward (mean over every element) against a double reference, its gradient against
// central finite differences, and MseRowSum's per-row means; the default Model::Evaluate.
#include <gtest/gtest.h>

#include "lockstep/nn/inputs.h"
#include "lockstep/nn/linear.h"
#include "lockstep/nn/model.h"
#include "lockstep/nn/mse_loss.h"
#include "nn/grad_check.h"

namespace lockstep::nn {
namespace {

using testing::ExpectGradientsMatch;
using testing::Leaf;
using testing::RandomVector;
using testing::ToDouble;

TEST(MseLoss, MeanOverElementsAndItsGradient) {
  const std::vector<float> pv = RandomVector(3 * 4, 2.0f, 41), tv = RandomVector(3 * 4, 2.0f, 42);
  Tape tape;
  Variable pred = Leaf(tape, {3, 4}, pv);
  Variable loss = MseLossForward(tape, pred, tv.data());
  ref::Vec pd = ToDouble(pv);
  auto f = [&] {
    double s = 0;
    for (size_t i = 0; i < pd.size(); ++i) s += (pd[i] - tv[i]) * (pd[i] - tv[i]);
    return s / static_cast<double>(pd.size());
  };
  EXPECT_NEAR(loss.data()[0], f(), 1e-6);
  tape.Backward(loss, 1.0f);
  ExpectGradientsMatch({{"pred", &pd, pred.grad().ToVector()}}, f);
  // Row sums of per-row means: rows [0, 3) of d = 4.
  EXPECT_NEAR(MseRowSum(pv.data(), tv.data(), 3, 4) / 3.0, f(), 1e-6);
}

// A model with only Loss(): the default Evaluate counts every row at the mean loss.
class Affine : public Model {
 public:
  Affine() {
    fc_ = Linear::TorchDefault(ps_, "fc", 2, 1, true);
    ps_.Finalize(3);
  }
  ParameterStore& params() override { return ps_; }
  const ParameterStore& params() const override { return ps_; }
  std::string name() const override { return "affine"; }
  Variable Loss(Tape& tape, const ModelInput& in) override {
    tape.DeclareParams(ps_.size());
    return MseLossForward(tape, fc_.Forward(tape, FloatInput(tape, in.features, {in.batch, 2})), in.values);
  }

 private:
  ParameterStore ps_;
  Linear fc_;
};

TEST(Model, DefaultEvaluateIsMeanLossTimesRows) {
  Affine m;
  const std::vector<float> x = {1, 2, -1, 0.5f, 3, -2}, y = {0.5f, -1, 2};
  ModelInput in;
  in.features = x.data();
  in.values = y.data();
  in.batch = 3;
  Tape tape;
  const double mean = m.Loss(tape, in).data()[0];
  tape.Clear();
  EvalResult r = m.Evaluate(in);
  EXPECT_EQ(r.count, 3);
  EXPECT_EQ(r.correct, 0);
  EXPECT_NEAR(r.loss_sum, 3 * mean, 1e-6);
  EXPECT_EQ(m.TrainFlopsPerSample(), 0.0);
  EXPECT_TRUE(m.CheckLayout({.features = 5}).ok());
}

}  // namespace
}  // namespace lockstep::nn
