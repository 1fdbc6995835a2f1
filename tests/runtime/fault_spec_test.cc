// --inject-fault specs: every accepted form parses to what it says, fields in any order, and
// everything else is one line naming the spec.
#include "lockstep/runtime/setup/fault_spec.h"

#include <gtest/gtest.h>

namespace lockstep::runtime {
namespace {

FaultSpec Parse(const std::string& spec) {
  auto f = ParseFaultSpec(spec, 4, 100);
  EXPECT_TRUE(f.ok()) << spec << ": " << f.status().message();
  return f.ok() ? *f : FaultSpec{};
}

std::string Error(const std::string& spec) {
  auto f = ParseFaultSpec(spec, 4, 100);
  EXPECT_FALSE(f.ok()) << spec;
  return f.ok() ? "" : f.status().message();
}

TEST(FaultSpec, EveryFormParses) {
  FaultSpec kill = Parse("kill:rank=1:step=37");
  EXPECT_EQ(kill.kind, FaultSpec::Kind::kKill);
  EXPECT_EQ(kill.rank, 1);
  EXPECT_EQ(kill.step, 37);
  FaultSpec ckpt = Parse("kill:rank=2:during=checkpoint");
  EXPECT_TRUE(ckpt.during_checkpoint);
  EXPECT_EQ(ckpt.step, 0);
  EXPECT_EQ(Parse("kill:rank=2:during=checkpoint:step=8").step, 8);
  EXPECT_EQ(Parse("kill:step=8:during=checkpoint:rank=2").rank, 2);  // any order
  EXPECT_EQ(Parse("hang:rank=0:step=5").kind, FaultSpec::Kind::kHang);
  FaultSpec nan = Parse("nan:rank=3:step=5");
  EXPECT_EQ(nan.kind, FaultSpec::Kind::kNan);
  EXPECT_FALSE(nan.nan_in_loss);
  EXPECT_TRUE(Parse("nan:rank=3:step=5:in=loss").nan_in_loss);
  FaultSpec slow = Parse("slow:rank=2:factor=2.5");
  EXPECT_EQ(slow.kind, FaultSpec::Kind::kSlow);
  EXPECT_EQ(slow.factor, 2.5);
  EXPECT_EQ(slow.step, 0);
  EXPECT_EQ(Parse("slow:rank=2:factor=2:step=10").step, 10);
  EXPECT_EQ(Parse("").kind, FaultSpec::Kind::kNone);
  EXPECT_FALSE(kill.permanent);
  FaultSpec lost = Parse("kill:rank=3:step=12:permanent");
  EXPECT_TRUE(lost.permanent);
  EXPECT_EQ(lost.step, 12);
  EXPECT_TRUE(Parse("kill:permanent:step=12:rank=3").permanent);  // any order
}

TEST(FaultSpec, BadSpecsNameWhatIsWrong) {
  EXPECT_NE(Error("explode:rank=0:step=1").find("unknown fault 'explode'"), std::string::npos);
  EXPECT_NE(Error("kill:rank=4:step=1").find("rank 4 is not in a world of 4"), std::string::npos);
  EXPECT_NE(Error("kill:rank=0:step=101").find("not in this run's 1..100"), std::string::npos);
  EXPECT_NE(Error("kill:rank=0").find("no step=S"), std::string::npos);
  EXPECT_NE(Error("kill:step=3").find("no rank=R"), std::string::npos);
  EXPECT_NE(Error("hang:rank=0:during=checkpoint").find("during=checkpoint is a kill"), std::string::npos);
  EXPECT_NE(Error("kill:rank=0:step=1:in=loss").find("unexpected field 'in=loss'"), std::string::npos);
  EXPECT_NE(Error("slow:rank=0").find("no factor=F"), std::string::npos);
  EXPECT_NE(Error("slow:rank=0:factor=0.5").find("factor must be a number in (1, 1000]"), std::string::npos);
  EXPECT_NE(Error("slow:rank=0:factor=x").find("factor must be"), std::string::npos);
  EXPECT_NE(Error("kill:rank=0:step=1:step=2").find("unexpected field 'step=2'"), std::string::npos);
  // Every message says which forms exist.
  EXPECT_NE(Error("kill").find("expected kill:rank=R:step=S"), std::string::npos);
  EXPECT_NE(Error("hang:rank=0:step=1:permanent").find("unexpected field 'permanent'"), std::string::npos);
  EXPECT_NE(Error("kill:rank=0:step=1:permanent:permanent").find("unexpected field 'permanent'"), std::string::npos);
  EXPECT_NE(Error("kill:rank=0:during=checkpoint:permanent").find("not during=checkpoint"), std::string::npos);
}

TEST(FaultSpec, WhenEachFaultIsDue) {
  FaultSpec nan = Parse("nan:rank=3:step=5");
  EXPECT_TRUE(NanDue(nan, 3, 4, /*in_loss=*/false));  // 0-based step 4 is step 5
  EXPECT_FALSE(NanDue(nan, 3, 4, /*in_loss=*/true));
  EXPECT_FALSE(NanDue(nan, 2, 4, false));
  EXPECT_FALSE(NanDue(nan, 3, 5, false));
  FaultSpec slow = Parse("slow:rank=1:factor=3:step=10");
  EXPECT_EQ(SlowFactor(slow, 1, 8), 1.0);
  EXPECT_EQ(SlowFactor(slow, 1, 9), 3.0);
  EXPECT_EQ(SlowFactor(slow, 1, 50), 3.0);
  EXPECT_EQ(SlowFactor(slow, 0, 50), 1.0);
  EXPECT_EQ(SlowFactor(Parse("slow:rank=1:factor=2"), 1, 0), 2.0);
}

// A kill fires as its step begins; a permanent one also in every later step (an attempt
// resumed past step S loses the rank again at its first step), never on another rank.
TEST(FaultSpec, PermanentKillIsDueFromItsStepOn) {
  FaultSpec once = Parse("kill:rank=3:step=12");
  EXPECT_FALSE(StopDue(once, 3, 10));
  EXPECT_TRUE(StopDue(once, 3, 11));  // 0-based step 11 is step 12
  EXPECT_FALSE(StopDue(once, 3, 12));
  FaultSpec lost = Parse("kill:rank=3:step=12:permanent");
  EXPECT_FALSE(StopDue(lost, 3, 10));
  EXPECT_TRUE(StopDue(lost, 3, 11));
  EXPECT_TRUE(StopDue(lost, 3, 12));
  EXPECT_TRUE(StopDue(lost, 3, 60));
  EXPECT_FALSE(StopDue(lost, 2, 60));
  EXPECT_FALSE(StopDue(Parse("kill:rank=3:during=checkpoint:step=12"), 3, 11));
}

}  // namespace
}  // namespace lockstep::runtime
