// `plan --hosts`: where a layout's groups fall on H hosts of L workers (ranks tp fastest, then
// dp, then pp; hosts take consecutive blocks of L), and the step model taking the curves
// measured across hosts for the groups that cross them, each group its share of the link.
#include <gtest/gtest.h>

#include "lockstep/planner/host_placement.h"
#include "lockstep/planner/step_model.h"
#include "planner/planner_test_util.h"

namespace lockstep::planner {
namespace {

parallel::ParallelDims Dims(int dp, int tp, int pp) {
  parallel::ParallelDims d;
  d.dp = dp;
  d.tp = tp;
  d.pp = pp;
  return d;
}

TEST(HostPlacement, OneMachinePlacesEveryGroupInsideIt) {
  for (int l : {0, 8, 16}) {
    const HostPlacement p = PlaceOnHosts(Dims(2, 2, 2), l);
    EXPECT_EQ(p.dp_hosts, 1) << l;
    EXPECT_EQ(p.dp_per_host, std::vector<int>{2}) << l;
    EXPECT_FALSE(p.send_across) << l;
    EXPECT_EQ(p.world_hosts, 1) << l;
  }
}

TEST(HostPlacement, DataParallelAcrossHostsSharesEachLinkWithTheOtherGroupsThere) {
  // 4 hosts x 2: dp=8 is one group, 2 a host on 4 hosts.
  HostPlacement p = PlaceOnHosts(Dims(8, 1, 1), 2);
  EXPECT_EQ(p.dp_hosts, 4);
  EXPECT_EQ(p.dp_per_host, (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(p.dp_share, 1);
  EXPECT_EQ(p.world_hosts, 4);
  // tp=2 inside each host: each dp group has one rank a host, and the groups of tp index 0 and
  // of tp index 1 cross every link at once.
  p = PlaceOnHosts(Dims(4, 2, 1), 2);
  EXPECT_EQ(p.dp_hosts, 4);
  EXPECT_EQ(p.dp_per_host, (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(p.dp_share, 2);
  // pp=2 over 2 hosts of 4: each stage's dp group of 4 inside one host; the boundary crosses,
  // every one of the 4 ranks of host 0 sending to host 1.
  p = PlaceOnHosts(Dims(4, 1, 2), 4);
  EXPECT_EQ(p.dp_hosts, 1);
  EXPECT_EQ(p.dp_share, 1);
  EXPECT_TRUE(p.send_across);
  EXPECT_EQ(p.send_share, 4);
  // pp=2 with stages of 4 on hosts of 2: dp spans 2 hosts, and the boundary (rank r to r + 4)
  // crosses from hosts 0, 1 to 2, 3, two ranks of a host sending.
  p = PlaceOnHosts(Dims(4, 1, 2), 2);
  EXPECT_EQ(p.dp_hosts, 2);
  EXPECT_TRUE(p.send_across);
  EXPECT_EQ(p.send_share, 2);
  // Stages inside a host: pp=2 on hosts of 4 with dp=2 (ranks 0,1 | 2,3 on host 0).
  p = PlaceOnHosts(Dims(2, 1, 2), 4);
  EXPECT_FALSE(p.send_across);
}

TEST(HostPlacement, TensorParallelStaysInsideAHost) {
  EXPECT_TRUE(TpInsideHosts(Dims(2, 2, 1), 2));
  EXPECT_TRUE(TpInsideHosts(Dims(1, 2, 2), 4));
  EXPECT_FALSE(TpInsideHosts(Dims(1, 4, 1), 2));
  EXPECT_FALSE(TpInsideHosts(Dims(2, 2, 1), 3));
  EXPECT_TRUE(TpInsideHosts(Dims(1, 8, 1), 0));  // one machine
}

// A dp group across 2 hosts takes the curve measured across 2 hosts (not the machine's of the
// same group size), times the groups sharing the link; the world collective across all hosts.
TEST(HostPlacement, TheStepModelTakesTheCurvesAcrossHostsAndTheLinkShare) {
  CommTable t = Table(2);  // inside a machine: 1 ms/MB allreduce
  t.Set(CommOp::kAllreduce, 2, Linear(1.0, 40.0), 2);  // across two hosts: 40 ms/MB
  t.Set(CommOp::kSend, 2, Linear(1.0, 20.0), 2);
  LayoutInput in;
  in.dp = 2;
  in.tp = 2;
  in.bucket_bytes = int64_t{25} << 20;  // one bucket, after backward
  in.stages = {Stage(1, 2)};
  const int64_t bytes = 4 * 2001;
  Result<Prediction> inside = PredictLayout(in, t);
  ASSERT_TRUE(inside.ok());
  EXPECT_NEAR(inside->comm_exposed_ms, t.Ms(CommOp::kAllreduce, 2, bytes), 1e-9);
  in.hosts = PlaceOnHosts(Dims(2, 2, 1), 2);  // dp across 2 hosts, both tp ranks' groups at once
  ASSERT_EQ(in.hosts.dp_share, 2);
  Result<Prediction> across = PredictLayout(in, t);
  ASSERT_TRUE(across.ok());
  EXPECT_NEAR(across->comm_exposed_ms, 2 * t.Ms(CommOp::kAllreduce, 2, bytes, 2), 1e-9);
  EXPECT_GT(across->step_ms, inside->step_ms + 30 * bytes / 1048576.0);
  // A pipeline whose boundary crosses hosts pays the send across them.
  LayoutInput pipe;
  pipe.pp = 2;
  pipe.micros = 2;
  pipe.stages = {Stage(1, 1), Stage(1, 1)};
  pipe.stages[0].send_bytes = pipe.stages[1].send_bytes = 1 << 20;
  Result<Prediction> local = PredictLayout(pipe, t);
  pipe.hosts = PlaceOnHosts(Dims(1, 1, 2), 1);
  ASSERT_TRUE(pipe.hosts.send_across);
  Result<Prediction> remote = PredictLayout(pipe, t);
  ASSERT_TRUE(local.ok() && remote.ok());
  EXPECT_GT(remote->pipeline_ms, local->pipeline_ms + 2 * (t.Ms(CommOp::kSend, 2, 1 << 20, 2) - 1) - 1e-9);
}

TEST(HostPlacement, CurvesAcrossHostsSurviveTheCache) {
  CommTable t;
  t.Set(CommOp::kAllreduce, 4, Linear(0.1, 1.0));
  t.Set(CommOp::kAllreduce, 4, Linear(5.0, 40.0), 2);
  Result<CommTable> back = CommTable::FromJson(t.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->Has(CommOp::kAllreduce, 4, 2));
  EXPECT_FALSE(back->Has(CommOp::kAllreduce, 4, 3));
  EXPECT_DOUBLE_EQ(back->Ms(CommOp::kAllreduce, 4, 1 << 20), 1.1);
  EXPECT_DOUBLE_EQ(back->Ms(CommOp::kAllreduce, 4, 1 << 20, 2), 45.0);
}

}  // namespace
}  // namespace lockstep::planner
