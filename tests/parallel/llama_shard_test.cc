// LlamaShard against nn::Llama, as gpt_shard_test.cc does for the GPT: the plain path is
// nn::Llama bit for bit; deterministic mode gives the same bits at every tensor-parallel degree
// the key/value heads allow, both where query slices share a key/value head (kv_heads 2 under
// 4 canonical slices) and where each has its own (kv_heads 4); Megatron's split stays within
// rounding of nn::Llama; two pipeline stages reproduce one; tied and untied heads.
#include "lockstep/parallel/llama_shard.h"

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

// vocab 64, context 16, 2 layers, 4 query heads of 8 sharing `kv_heads`, SwiGLU 48.
nn::LlamaConfig TinyLlama(int64_t kv_heads, bool tied = false) {
  nn::LlamaConfig c;
  c.vocab = 64;
  c.context = 16;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = kv_heads;
  c.width = 32;
  c.ffn_hidden = 48;
  c.tie_embeddings = tied;
  return c;
}

struct Outcome {
  float loss = 0;
  Canonical grads;
};

Outcome RunShard(const nn::LlamaConfig& c, int tp, int slices, bool det, const Canonical& values,
                 const testing::TokenBatch& batch) {
  std::vector<float> losses(static_cast<size_t>(tp), std::numeric_limits<float>::quiet_NaN());
  testing::RankMerge grads;
  std::mutex mu;
  testing::RunRanks(tp, [&](std::shared_ptr<comm::Communicator> comm) {
    tensor::ScopedDeterministic deterministic_kernels(det);
    tensor::ScopedComputeThreads threads(2);
    TpContext ctx(comm, slices, det);
    LlamaShardOptions o;
    o.model = c;
    auto shard = LlamaShard::Create(o, &ctx);
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
  return {losses[0], grads.values()};
}

Outcome RunLlama(const nn::LlamaConfig& c, const Canonical& values, const testing::TokenBatch& batch) {
  nn::Llama llama(c);
  for (const nn::ParamInfo& p : llama.params()) {
    const std::vector<float>& v = values.at(p.name);
    std::memcpy(llama.params().flat_params() + p.offset, v.data(), v.size() * sizeof(float));
  }
  Tape tape;
  Variable loss = llama.Loss(tape, batch.input());
  Outcome out;
  out.loss = loss.data()[0];
  tape.Backward(loss, 1.0f);
  for (const nn::ParamInfo& p : llama.params())
    out.grads[p.name].assign(llama.params().flat_grads() + p.offset,
                             llama.params().flat_grads() + p.offset + p.numel);
  return out;
}

const testing::TokenBatch& Batch() {
  static const testing::TokenBatch b = testing::RandomTokens(2, 16, 64, 9);
  return b;
}

TEST(LlamaShard, PlainPathIsNnLlamaBitForBit) {
  for (bool tied : {false, true}) {
    const nn::LlamaConfig c = TinyLlama(2, tied);
    const Canonical values = testing::RandomCanonical(c, 5);
    Outcome whole = RunLlama(c, values, Batch());
    Outcome shard = RunShard(c, 1, 1, false, values, Batch());
    EXPECT_EQ(std::memcmp(&whole.loss, &shard.loss, sizeof(float)), 0) << whole.loss << " vs " << shard.loss;
    EXPECT_EQ(testing::CompareBits(whole.grads, shard.grads), "") << "tied " << tied;
  }
}

TEST(LlamaShard, DeterministicSlicesAreCloseToNnLlama) {
  for (int64_t kv : {1, 2, 4}) {
    const nn::LlamaConfig c = TinyLlama(kv);
    const Canonical values = testing::RandomCanonical(c, 5);
    Outcome whole = RunLlama(c, values, Batch());
    Outcome det = RunShard(c, 1, 4, true, values, Batch());
    EXPECT_NEAR(det.loss, whole.loss, 1e-5 * std::fabs(whole.loss)) << "kv " << kv;
    EXPECT_LT(testing::MaxRelativeDifference(whole.grads, det.grads), 1e-4) << "kv " << kv;
  }
}

TEST(LlamaShard, DeterministicTensorParallelIsBitIdenticalAtEveryDegree) {
  // kv 2: two query slices share each kv head; kv 4: one each. tp may not exceed kv_heads.
  for (int64_t kv : {2, 4}) {
    for (bool tied : {false, true}) {
      const nn::LlamaConfig c = TinyLlama(kv, tied);
      const Canonical values = testing::RandomCanonical(c, 6);
      Outcome one = RunShard(c, 1, 4, true, values, Batch());
      for (int tp : {2, 4}) {
        if (tp > kv) continue;
        Outcome many = RunShard(c, tp, 4, true, values, Batch());
        EXPECT_EQ(std::memcmp(&one.loss, &many.loss, sizeof(float)), 0)
            << "kv " << kv << " tp=" << tp << ": " << one.loss << " vs " << many.loss;
        EXPECT_EQ(testing::CompareBits(one.grads, many.grads), "") << "kv " << kv << " tp=" << tp;
      }
    }
  }
}

TEST(LlamaShard, MegatronTensorParallelMatchesNnLlamaWithinRounding) {
  const nn::LlamaConfig c = TinyLlama(2);
  const Canonical values = testing::RandomCanonical(c, 7);
  Outcome whole = RunLlama(c, values, Batch());
  Outcome many = RunShard(c, 2, 2, false, values, Batch());
  EXPECT_NEAR(many.loss, whole.loss, 1e-5 * std::fabs(whole.loss));
  EXPECT_LT(testing::MaxRelativeDifference(whole.grads, many.grads), 1e-4);
}

// Two stages on one thread, the activation and its gradient handed over by copy, against one
// stage holding every layer (a tied head keeps its own copy of the embedding on stage 1).
TEST(LlamaShard, PipelineStagesReproduceTheWholeModel) {
  for (bool det : {false, true}) {
    for (bool tied : {false, true}) {
      const nn::LlamaConfig c = TinyLlama(2, tied);
      const Canonical values = testing::RandomCanonical(c, 8);
      auto comm = comm::CreateThreadsGroup(1)[0];
      TpContext ctx(comm, det ? 4 : 1, det);
      tensor::ScopedDeterministic deterministic_kernels(det);
      Outcome whole = RunShard(c, 1, det ? 4 : 1, det, values, Batch());
      LlamaShardOptions o0, o1;
      o0.model = o1.model = c;
      o0.end_layer = 1;
      o0.has_head = false;
      o1.first_layer = 1;
      o1.has_embedding = false;
      auto s0 = LlamaShard::Create(o0, &ctx);
      auto s1 = LlamaShard::Create(o1, &ctx);
      ASSERT_TRUE(s0.ok() && s1.ok());
      EXPECT_EQ((*s0)->TiedParam() >= 0, tied);
      EXPECT_EQ((*s1)->TiedParam() >= 0, tied);
      testing::LoadCanonical(values, **s0);
      testing::LoadCanonical(values, **s1);
      Tape t0, t1;
      Variable x0 = (*s0)->Forward(t0, Batch().input(), Variable());
      tensor::Tensor copy = tensor::Tensor::Empty(x0.shape());
      std::memcpy(copy.data<float>(), x0.data(), x0.numel() * sizeof(float));
      Variable x1 = Variable::Activation(copy, true, nullptr);
      Variable loss = (*s1)->Forward(t1, Batch().input(), x1);
      const float l = loss.data()[0];
      t1.Backward(loss, 1.0f);
      t0.BackwardFrom(x0, x1.grad().data<float>());
      EXPECT_EQ(std::memcmp(&l, &whole.loss, sizeof l), 0) << l << " vs " << whole.loss;
      Canonical grads;
      testing::AddToCanonical(**s0, (*s0)->params().flat_grads(), &grads);
      testing::AddToCanonical(**s1, (*s1)->params().flat_grads(), &grads);
      if (tied) {
        // The two stages' parts of the tied gradient: what the trainer sums (the embedding's
        // scatter-add part plus the head's GEMM part), compared with the single stage's sum.
        Canonical s0g, s1g;
        testing::AddToCanonical(**s0, (*s0)->params().flat_grads(), &s0g);
        testing::AddToCanonical(**s1, (*s1)->params().flat_grads(), &s1g);
        std::vector<float>& g = grads.at("embed_tokens.weight");
        for (size_t i = 0; i < g.size(); ++i)
          g[i] = s0g.at("embed_tokens.weight")[i] + s1g.at("embed_tokens.weight")[i];
      }
      EXPECT_EQ(testing::CompareBits(whole.grads, grads), "") << "det " << det << " tied " << tied;
    }
  }
}

TEST(LlamaShard, RejectsLayoutsThatDoNotDivideTheModel) {
  testing::RunRanks(4, [](std::shared_ptr<comm::Communicator> comm) {
    TpContext ctx(comm, 4, false);
    LlamaShardOptions o;
    o.model = TinyLlama(2);
    auto shard = LlamaShard::Create(o, &ctx);
    ASSERT_FALSE(shard.ok());
    EXPECT_NE(shard.status().message().find("model.kv_heads = 2 is not divisible by the tensor-parallel degree tp = 4"),
              std::string::npos)
        << shard.status().message();
  });
  auto comm = comm::CreateThreadsGroup(1)[0];
  TpContext ctx(comm, 8, true);
  LlamaShardOptions o;
  o.model = TinyLlama(2);
  auto shard = LlamaShard::Create(o, &ctx);
  ASSERT_FALSE(shard.ok());
  EXPECT_EQ(shard.status().message(), "model.heads = 4 is not divisible by train.det_tp_slices = 8");
}

}  // namespace
}  // namespace lockstep::parallel
