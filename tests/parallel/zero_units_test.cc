// ZeroUnits' transient buffers (a unit's gathered parameters, its gradient, the reduced part
// a rank receives) are handed out again from one spare per role instead of being allocated
// for every unit of every micro-batch. (That the gradients stay exact is the CLI's Zero23
// tests: every stage against one worker.)
#include "lockstep/parallel/zero_units.h"

#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "lockstep/parallel/gpt_shard.h"
#include "lockstep/tensor/memory.h"
#include "lockstep/tensor/threads.h"
#include "parallel/parallel_test_util.h"

namespace lockstep::parallel {
namespace {

struct StepAllocations {
  int64_t first = 0, later = 0;  // tracked allocations of the first step, of the third
  int64_t grad_bytes = 0, shard_bytes = 0;  // gradient bytes held after the third step; the shard's
};

// Three steps (two micro-batches each) of a tiny GPT under ZeRO `stage` on two ranks.
StepAllocations RunSteps(int stage) {
  StepAllocations out;
  std::mutex mu;
  const testing::TokenBatch batch = testing::RandomTokens(2, 16, testing::TinyGpt().vocab, 7);
  testing::RunRanks(2, [&](std::shared_ptr<comm::Communicator> comm) {
    tensor::MemoryTracker tracker;
    tensor::ScopedTracker scope(&tracker);
    tensor::ScopedComputeThreads threads(1);
    auto solo = comm->Split(comm->rank(), 0);  // tensor parallelism of one: a group of itself
    ASSERT_TRUE(solo.ok()) << solo.status().message();
    TpContext ctx(*solo, 1, false);
    GptShardOptions o;
    o.model = testing::TinyGpt();
    o.flat_params = stage != 3;
    o.flat_grads = false;
    auto shard = GptShard::Create(o, &ctx);
    ASSERT_TRUE(shard.ok()) << shard.status().message();
    auto zero = ZeroUnits::Create(stage, comm, shard->get(), 11);
    ASSERT_TRUE(zero.ok()) << zero.status().message();
    // Deterministic mode's contribution slot: each unit's gradient is copied there when its
    // backward ends (no asynchronous reduce), so the counts below do not depend on timing.
    std::vector<float> slot(static_cast<size_t>((*shard)->params().numel()));
    autograd::Tape tape;
    int64_t counts[3] = {};
    for (int step = 0; step < 3; ++step) {
      const int64_t before = tracker.NumAllocations();
      (*zero)->BeginStep();
      (*zero)->SetContribution(slot.data());
      for (int micro = 0; micro < 2; ++micro) {
        autograd::Variable loss = (*shard)->Forward(tape, batch.input(), autograd::Variable());
        tape.Backward(loss, 1.0f);
      }
      ASSERT_TRUE((*zero)->ReduceContributions(slot.data(), 2).ok());
      counts[step] = tracker.NumAllocations() - before;
    }
    std::lock_guard<std::mutex> lock(mu);
    if (comm->rank() != 0) return;
    out.first = counts[0];
    out.later = counts[2];
    out.grad_bytes = tracker.Current(tensor::MemoryTag::kGradient);
    out.shard_bytes = 4 * (*zero)->owned().size();
  });
  return out;
}

TEST(ZeroUnits, ReuseUnitBuffersAfterTheFirstStep) {
  for (int stage : {2, 3}) {
    const StepAllocations a = RunSteps(stage);
    // The tiny GPT has four units (embedding, two blocks, head) of three sizes. Without the
    // spares the third step made 9 (stage 2) and 25 (stage 3) allocations in all (the loss and
    // a few tensors outside the tape's pool included): every unit's gradient, and in stage 3
    // its parameters, forward and backward, each micro-batch. With them: 3 and 6.
    EXPECT_LE(a.later, stage == 2 ? 3 : 6) << "stage " << stage << ": first step " << a.first;
    // Between steps only the gradient shard is held: no unit's gradient stays bound to the
    // parameters (stage 2 kept them all until their next backward, so no spare was reusable).
    EXPECT_EQ(a.grad_bytes, a.shard_bytes) << "stage " << stage;
  }
}

}  // namespace
}  // namespace lockstep::parallel
