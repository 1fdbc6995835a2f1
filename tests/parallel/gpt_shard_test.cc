// GptShard against nn::Gpt: the plain path is nn::Gpt bit for bit; deterministic mode gives
// the same bits at tensor-parallel degrees 1, 2 and 4 (the canonical slices) and stays close
// to nn::Gpt; pipeline stages chained by hand reproduce the single stage exactly.
#include "lockstep/parallel/gpt_shard.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>

#include "lockstep/comm/threads/threads_world.h"
#include "lockstep/tensor/threads.h"
#include "parallel/parallel_test_util.h"

namespace lockstep::parallel {
namespace {

using autograd::Tape;
using autograd::Variable;
using testing::Canonical;

struct Result1 {
  float loss = 0;
  Canonical grads;
};

// Loss and canonical gradients of a GptShard over `tp` ranks (threads), merged over ranks
// once every rank is done: all ranks must report the same loss, and every gradient element
// held by several ranks (tp-replicated tensors) must have the same bits on each.
Result1 RunShard(int tp, int slices, bool det, const Canonical& values, const testing::TokenBatch& batch,
                 int first_layer = 0, int end_layer = -1) {
  std::vector<float> losses(static_cast<size_t>(tp), std::numeric_limits<float>::quiet_NaN());
  testing::RankMerge grads;
  std::mutex mu;
  testing::RunRanks(tp, [&](std::shared_ptr<comm::Communicator> comm) {
    tensor::ScopedDeterministic deterministic_kernels(det);  // as the trainer sets it
    tensor::ScopedComputeThreads threads(2);
    TpContext ctx(comm, slices, det);
    GptShardOptions o;
    o.model = testing::TinyGpt();
    auto shard = GptShard::Create(o, &ctx);
    ASSERT_TRUE(shard.ok()) << shard.status().message();
    testing::LoadCanonical(values, **shard);
    Tape tape;
    Variable loss = (*shard)->Forward(tape, batch.input(), Variable());
    const float l = loss.data()[0];
    tape.Backward(loss, 1.0f);
    ASSERT_TRUE(ctx.status().ok()) << ctx.status().message();
    std::lock_guard<std::mutex> lock(mu);
    losses[static_cast<size_t>(comm->rank())] = l;
    grads.Add(**shard, (*shard)->params().flat_grads());
  });
  for (int r = 1; r < tp; ++r)
    EXPECT_EQ(std::memcmp(&losses[r], &losses[0], sizeof(float)), 0)
        << "rank " << r << ": " << losses[r] << " vs " << losses[0];
  EXPECT_EQ(grads.Problems(), "") << "tp=" << tp;
  Result1 out;
  out.loss = losses[0];
  out.grads = grads.values();
  return out;
}

Result1 RunGpt(const Canonical& values, const testing::TokenBatch& batch) {
  nn::Gpt gpt(testing::TinyGpt());
  for (const nn::ParamInfo& p : gpt.params()) {
    const std::vector<float>& v = values.at(p.name);
    std::memcpy(gpt.params().flat_params() + p.offset, v.data(), v.size() * sizeof(float));
  }
  Tape tape;
  Variable loss = gpt.Loss(tape, batch.input());
  Result1 out;
  out.loss = loss.data()[0];
  tape.Backward(loss, 1.0f);
  for (const nn::ParamInfo& p : gpt.params())
    out.grads[p.name].assign(gpt.params().flat_grads() + p.offset, gpt.params().flat_grads() + p.offset + p.numel);
  return out;
}

class GptShardTest : public ::testing::Test {
 protected:
  Canonical values_ = testing::RandomCanonical(testing::TinyGpt(), 5);
  testing::TokenBatch batch_ = testing::RandomTokens(2, 16, 64, 9);
};

TEST_F(GptShardTest, PlainPathIsNnGptBitForBit) {
  Result1 gpt = RunGpt(values_, batch_);
  Result1 shard = RunShard(1, 1, false, values_, batch_);
  EXPECT_EQ(std::memcmp(&gpt.loss, &shard.loss, sizeof(float)), 0) << gpt.loss << " vs " << shard.loss;
  EXPECT_EQ(testing::CompareBits(gpt.grads, shard.grads), "");
  EXPECT_EQ(gpt.grads.size(), shard.grads.size());
}

TEST_F(GptShardTest, DeterministicSlicesAreCloseToNnGpt) {
  Result1 gpt = RunGpt(values_, batch_);
  Result1 det = RunShard(1, 4, true, values_, batch_);
  EXPECT_NEAR(det.loss, gpt.loss, 1e-5 * std::fabs(gpt.loss));
  EXPECT_LT(testing::MaxRelativeDifference(gpt.grads, det.grads), 1e-4);
}

TEST_F(GptShardTest, DeterministicTensorParallelIsBitIdenticalAtEveryDegree) {
  Result1 one = RunShard(1, 4, true, values_, batch_);
  for (int tp : {2, 4}) {
    Result1 many = RunShard(tp, 4, true, values_, batch_);
    EXPECT_EQ(std::memcmp(&one.loss, &many.loss, sizeof(float)), 0)
        << "tp=" << tp << ": " << one.loss << " vs " << many.loss;
    EXPECT_EQ(testing::CompareBits(one.grads, many.grads), "") << "tp=" << tp;
    EXPECT_EQ(one.grads.size(), many.grads.size());
  }
}

TEST_F(GptShardTest, MegatronTensorParallelMatchesNnGptWithinRounding) {
  Result1 gpt = RunGpt(values_, batch_);
  for (int tp : {2, 4}) {
    Result1 many = RunShard(tp, tp, false, values_, batch_);
    EXPECT_NEAR(many.loss, gpt.loss, 1e-5 * std::fabs(gpt.loss)) << "tp=" << tp;
    EXPECT_LT(testing::MaxRelativeDifference(gpt.grads, many.grads), 1e-4) << "tp=" << tp;
  }
}

// Two stages on one thread, the activation and its gradient handed over by copy (what the
// pipeline's send/recv does), against one stage holding every layer.
void ExpectStagesMatchWhole(bool det, const Canonical& values, const testing::TokenBatch& batch) {
  auto comm = comm::CreateThreadsGroup(1)[0];
  TpContext ctx(comm, det ? 4 : 1, det);
  tensor::ScopedDeterministic deterministic_kernels(det);
  Result1 whole = RunShard(1, det ? 4 : 1, det, values, batch);
  GptShardOptions o0, o1;
  o0.model = o1.model = testing::TinyGpt();
  o0.end_layer = 1;
  o0.has_head = false;
  o1.first_layer = 1;
  o1.has_embedding = false;
  auto s0 = GptShard::Create(o0, &ctx);
  auto s1 = GptShard::Create(o1, &ctx);
  ASSERT_TRUE(s0.ok() && s1.ok());
  testing::LoadCanonical(values, **s0);
  testing::LoadCanonical(values, **s1);
  Tape t0, t1;
  Variable x0 = (*s0)->Forward(t0, batch.input(), Variable());
  ASSERT_EQ(x0.shape(), (*s0)->ActivationShape(batch.input()));
  tensor::Tensor copy = tensor::Tensor::Empty(x0.shape());
  std::memcpy(copy.data<float>(), x0.data(), x0.numel() * sizeof(float));
  Variable x1 = Variable::Activation(copy, true, nullptr);
  Variable loss = (*s1)->Forward(t1, batch.input(), x1);
  const float l = loss.data()[0];
  t1.Backward(loss, 1.0f);
  ASSERT_TRUE(x1.has_grad());
  t0.BackwardFrom(x0, x1.grad().data<float>());
  EXPECT_EQ(std::memcmp(&l, &whole.loss, sizeof l), 0) << l << " vs " << whole.loss;
  Canonical grads;
  testing::AddToCanonical(**s0, (*s0)->params().flat_grads(), &grads);
  testing::AddToCanonical(**s1, (*s1)->params().flat_grads(), &grads);
  EXPECT_EQ(testing::CompareBits(whole.grads, grads), "");
  EXPECT_EQ(grads.size(), whole.grads.size());
}

TEST_F(GptShardTest, PipelineStagesReproduceTheWholeModel) {
  ExpectStagesMatchWhole(false, values_, batch_);
  ExpectStagesMatchWhole(true, values_, batch_);
}

TEST_F(GptShardTest, EvaluationAgreesAcrossTensorParallelDegrees) {
  std::vector<nn::EvalResult> results(3);
  int i = 0;
  for (int tp : {1, 2, 4}) {
    std::mutex mu;
    testing::RunRanks(tp, [&](std::shared_ptr<comm::Communicator> comm) {
      TpContext ctx(comm, 4, true);
      GptShardOptions o;
      o.model = testing::TinyGpt();
      auto shard = GptShard::Create(o, &ctx);
      ASSERT_TRUE(shard.ok());
      testing::LoadCanonical(values_, **shard);
      nn::EvalResult r = (*shard)->Evaluate(batch_.input(), nullptr, nullptr);
      std::lock_guard<std::mutex> lock(mu);
      if (comm->rank() == 0) results[i] = r;
    });
    ++i;
  }
  for (int k = 1; k < 3; ++k) {
    EXPECT_EQ(results[k].loss_sum, results[0].loss_sum);
    EXPECT_EQ(results[k].count, results[0].count);
    EXPECT_EQ(results[k].correct, results[0].correct);
  }
  EXPECT_EQ(results[0].count, 2 * 16 - 1);
}

TEST(GptShard, RejectsLayoutsThatDoNotDivideTheModel) {
  auto comm = comm::CreateThreadsGroup(1)[0];
  TpContext ctx(comm, 8, true);
  GptShardOptions o;
  o.model = testing::TinyGpt();  // 4 heads
  auto shard = GptShard::Create(o, &ctx);
  ASSERT_FALSE(shard.ok());
  EXPECT_EQ(shard.status().message(), "model.heads = 4 is not divisible by train.det_tp_slices = 8");
}

}  // namespace
}  // namespace lockstep::parallel
