// Failure handling: timeouts name the rank, collective, sequence number, count, dtype and
// the late ranks; a timed-out communicator fails fast afterwards; mismatched calls produce the
// desync message on every rank; argument errors are local. Nothing hangs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "comm/comm_test_util.h"
#include "lockstep/core/clock.h"

namespace lockstep::comm {
namespace {

using std::chrono::milliseconds;
using testing::RunRanks;

CollectiveOptions Timeout(int ms) {
  CollectiveOptions o;
  o.timeout = milliseconds(ms);
  return o;
}

TEST(Timeout, RankThatNeverCallsIsNamed) {
  RunRanks(3, [](Communicator& c) {
    std::vector<float> buf(8, 1.0f);
    // Collective #1 succeeds everywhere; rank 1 skips #2.
    ASSERT_TRUE(c.Allreduce(buf.data(), buf.data(), 8, DType::kF32, ReduceOp::kSum)->Wait().ok());
    if (c.rank() == 1) return;
    Stopwatch watch;
    Status s = c.Allreduce(buf.data(), buf.data(), 8, DType::kF32, ReduceOp::kSum, Timeout(200))->Wait();
    const double waited = watch.ElapsedSeconds();
    EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
    const std::string prefix =
        "rank " + std::to_string(c.rank()) + ": collective allreduce #2 (count=8, dtype=f32) timed out after 0.";
    EXPECT_EQ(s.message().rfind(prefix, 0), 0u) << s.message();
    EXPECT_NE(s.message().find(" s waiting for rank(s) 1"), std::string::npos) << s.message();
    EXPECT_GE(waited, 0.15);
    EXPECT_LT(waited, 5.0);  // a liveness bound, not a performance assertion
    // Later operations fail fast with Aborted.
    Status again = c.Barrier()->Wait();
    EXPECT_EQ(again.code(), StatusCode::kAborted) << again.ToString();
    EXPECT_NE(again.message().find("collective barrier #3 aborted"), std::string::npos) << again.message();
  });
}

TEST(Timeout, LateRankFailsFastWithReason) {
  std::atomic<int> timed_out{0};
  RunRanks(2, [&](Communicator& c) {
    int32_t x = 1;
    if (c.rank() == 1) {
      while (timed_out.load() == 0) std::this_thread::sleep_for(milliseconds(5));
    }
    Status s = c.Allreduce(&x, &x, 1, DType::kI32, ReduceOp::kSum, Timeout(200))->Wait();
    if (c.rank() == 0) {
      EXPECT_EQ(s.code(), StatusCode::kTimeout);
      timed_out = 1;
    } else {
      EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
      EXPECT_NE(s.message().find("rank 1: collective allreduce #1 aborted"), std::string::npos) << s.message();
      EXPECT_NE(s.message().find("rank 0: collective allreduce #1 (count=1, dtype=i32) timed out"), std::string::npos)
          << s.message();
    }
  });
}

// Wait(timeout) shorter than the operation's own timeout also ends the wait and aborts.
TEST(Timeout, CallerWaitTimeout) {
  RunRanks(2, [](Communicator& c) {
    if (c.rank() == 1) return;
    float x = 0;
    WorkHandle w = c.Allreduce(&x, &x, 1, DType::kF32, ReduceOp::kSum, Timeout(60'000));
    Stopwatch watch;
    Status s = w->Wait(milliseconds(150));
    EXPECT_LT(watch.ElapsedSeconds(), 5.0);
    EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
    EXPECT_NE(s.message().find("rank 0: collective allreduce #1 (count=1, dtype=f32) timed out"), std::string::npos)
        << s.message();
    EXPECT_TRUE(w->Done());
    EXPECT_EQ(c.Barrier()->Wait().code(), StatusCode::kAborted);
  });
}

TEST(Timeout, RecvWithoutSender) {
  RunRanks(2, [](Communicator& c) {
    if (c.rank() == 0) return;
    std::vector<float> buf(4);
    Status s = c.Recv(buf.data(), 4, DType::kF32, 0, 3, Timeout(200))->Wait();
    EXPECT_EQ(s.code(), StatusCode::kTimeout);
    EXPECT_EQ(s.message().rfind("rank 1: recv from rank 0 (tag=3, count=4, dtype=f32) timed out "
                                "after 0.",
                                0),
              0u)
        << s.message();
  });
}

TEST(Desync, DifferentCollectivesNameEachRanksCall) {
  RunRanks(2, [](Communicator& c) {
    std::vector<float> buf(4, 1.0f);
    Status s = c.rank() == 0 ? c.Allreduce(buf.data(), buf.data(), 4, DType::kF32, ReduceOp::kSum)->Wait()
                             : c.Broadcast(buf.data(), 4, DType::kF32, 0)->Wait();
    EXPECT_EQ(s.code(), StatusCode::kAborted);
    EXPECT_EQ(s.message(),
              "collective #1 desync: rank 0 called allreduce(count=4, f32, sum), rank 1 called "
              "broadcast(count=4, f32, root=0)");
    EXPECT_EQ(c.Barrier()->Wait().code(), StatusCode::kAborted);
  });
}

// A count mismatch is a memory-safety check (the peers would read or write past a buffer), so
// it is caught without debug mode; each mismatch is checked alone, so dropping any one field
// from the comparison fails here.
TEST(Desync, CountMismatchIsNamed) {
  RunRanks(3, [](Communicator& c) {
    std::vector<int64_t> buf(16, 1);
    ASSERT_TRUE(c.Barrier()->Wait().ok());
    Status s = c.AllGather(buf.data(), buf.data() + 8, c.rank() == 2 ? 1 : 2, DType::kI64)->Wait();
    EXPECT_EQ(s.code(), StatusCode::kAborted);
    EXPECT_EQ(s.message(),
              "collective #2 desync: rank 0 called allgather(count=2, i64), rank 1 called "
              "allgather(count=2, i64), rank 2 called allgather(count=1, i64)");
  });
}

TEST(Desync, DtypeMismatchIsNamed) {
  RunRanks(3, [](Communicator& c) {
    std::vector<int64_t> buf(16, 1);
    ASSERT_TRUE(c.Barrier()->Wait().ok());
    Status s = c.AllGather(buf.data(), buf.data() + 8, 2, c.rank() == 1 ? DType::kI32 : DType::kI64)->Wait();
    EXPECT_EQ(s.code(), StatusCode::kAborted);
    EXPECT_EQ(s.message(),
              "collective #2 desync: rank 0 called allgather(count=2, i64), rank 1 called "
              "allgather(count=2, i32), rank 2 called allgather(count=2, i64)");
  });
}

TEST(Desync, ReduceOpMismatchNeedsDebugMode) {
  ThreadsWorldOptions debug;
  debug.debug_collectives = true;
  RunRanks(
      2,
      [](Communicator& c) {
        float x = 1;
        Status s = c.Allreduce(&x, &x, 1, DType::kF32, c.rank() == 0 ? ReduceOp::kSum : ReduceOp::kMax)->Wait();
        EXPECT_EQ(s.message(),
                  "collective #1 desync: rank 0 called allreduce(count=1, f32, sum), rank 1 "
                  "called allreduce(count=1, f32, max)");
      },
      debug);
}

TEST(Errors, InvalidArgumentsAreLocalAndKeepCommunicatorUsable) {
  RunRanks(2, [](Communicator& c) {
    std::vector<int32_t> buf(4, c.rank() + 1);
    EXPECT_EQ(c.Broadcast(buf.data(), 4, DType::kI32, 2)->Wait().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(c.Allreduce(buf.data(), buf.data(), 4, DType::kU8, ReduceOp::kSum)->Wait().code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(c.Allreduce(nullptr, buf.data(), 4, DType::kI32, ReduceOp::kSum)->Wait().code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(c.Send(buf.data(), 4, DType::kI32, -1, 0)->Wait().code(), StatusCode::kInvalidArgument);
    Status ok = c.Allreduce(buf.data(), buf.data(), 4, DType::kI32, ReduceOp::kSum)->Wait();
    ASSERT_TRUE(ok.ok()) << ok.ToString();
    EXPECT_EQ(buf[0], 3);
  });
}

TEST(Errors, RecvCountMismatch) {
  RunRanks(2, [](Communicator& c) {
    std::vector<float> buf(8, 1.0f);
    if (c.rank() == 0) {
      ASSERT_TRUE(c.Send(buf.data(), 8, DType::kF32, 1, 0)->Wait().ok());
    } else {
      Status s = c.Recv(buf.data(), 4, DType::kF32, 0, 0)->Wait();
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
      EXPECT_NE(s.message().find("the matching send had 8 elements of f32"), std::string::npos);
    }
  });
}

TEST(Errors, AbortFailsPeersPendingCollective) {
  RunRanks(2, [](Communicator& c) {
    float x = 1;
    if (c.rank() == 0) {
      std::this_thread::sleep_for(milliseconds(50));
      c.Abort(Status::Aborted("watchdog gave up"));
      EXPECT_EQ(c.Barrier()->Wait().code(), StatusCode::kAborted);
      return;
    }
    Status s = c.Allreduce(&x, &x, 1, DType::kF32, ReduceOp::kSum, Timeout(30'000))->Wait();
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
    EXPECT_NE(s.message().find("watchdog gave up"), std::string::npos) << s.message();
  });
}

TEST(Errors, DestroyingCommunicatorWithPendingWorkDoesNotHang) {
  WorkHandle pending;
  {
    auto comms = CreateThreadsGroup(2);
    float x = 1;
    pending = comms[0]->Allreduce(&x, &x, 1, DType::kF32, ReduceOp::kSum, Timeout(60'000));
  }
  EXPECT_TRUE(pending->Done());
  EXPECT_EQ(pending->Wait().code(), StatusCode::kAborted);
}

TEST(Options, DefaultTimeoutSetter) {
  const auto before = DefaultTimeout();
  SetDefaultTimeout(milliseconds(1234));
  EXPECT_EQ(CollectiveOptions{}.timeout, milliseconds(1234));
  SetDefaultTimeout(before);
  EXPECT_EQ(CollectiveOptions{}.timeout, before);
  EXPECT_FALSE(ThreadsWorld::Create(0).ok());
  EXPECT_TRUE(ThreadsWorld::Create(3).ok());
}

}  // namespace
}  // namespace lockstep::comm
