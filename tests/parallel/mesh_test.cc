// Device mesh: --layout parsing and its errors, the rank <-> coordinate map, and the dp/tp/pp
// groups BuildMesh makes (checked by allreducing world ranks inside each group on 8 threads).
#include "lockstep/parallel/mesh.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

#include "lockstep/comm/threads/threads_world.h"

namespace lockstep::parallel {
namespace {

TEST(ParallelDims, ParsesAnyOrderAndInfersDp) {
  auto d = ParallelDims::Parse("pp=2,dp=1,tp=2", 4);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->dp, 1);
  EXPECT_EQ(d->tp, 2);
  EXPECT_EQ(d->pp, 2);
  EXPECT_EQ(d->ToString(), "dp=1,tp=2,pp=2");
  auto inferred = ParallelDims::Parse("tp=2", 8);
  ASSERT_TRUE(inferred.ok());
  EXPECT_EQ(inferred->dp, 4);
  auto all_dp = ParallelDims::Parse("", 3, 2);
  ASSERT_TRUE(all_dp.ok());
  EXPECT_EQ(all_dp->dp, 3);
  EXPECT_EQ(all_dp->zero, 2);
}

void ExpectError(const std::string& layout, int world, const std::string& needle) {
  auto d = ParallelDims::Parse(layout, world);
  ASSERT_FALSE(d.ok()) << layout;
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(d.status().message().find(needle), std::string::npos) << d.status().message();
  EXPECT_EQ(d.status().message().find('\n'), std::string::npos);
}

TEST(ParallelDims, ErrorsNameTheProblem) {
  ExpectError("dp=2,tp=2,pp=2", 4, "dp × tp × pp = 2 × 2 × 2 = 8 workers, but the world has 4");
  ExpectError("tp=3", 4, "dp × tp × pp = 1 × 3 × 1 = 3 workers");
  ExpectError("cp=2", 2, "unknown factor 'cp'");
  ExpectError("dp=2,dp=2", 4, "given twice");
  ExpectError("dp=0", 1, "positive integer");
  ExpectError("dp=-1", 1, "positive integer");
  ExpectError("dp2", 2, "not factor=N");
  EXPECT_FALSE(ParallelDims::Parse("", 2, 4).ok());
}

TEST(ParallelDims, CoordinatesAreABijectionWithTpFastest) {
  ParallelDims d{2, 3, 2};
  std::set<int> seen;
  for (int r = 0; r < d.world(); ++r) {
    MeshCoord c = d.CoordOf(r);
    EXPECT_EQ(d.RankOf(c), r);
    seen.insert(c.pp * 100 + c.dp * 10 + c.tp);
  }
  EXPECT_EQ(seen.size(), 12u);
  EXPECT_EQ(d.CoordOf(1), (MeshCoord{0, 1, 0}));  // neighbours differ in tp
  EXPECT_EQ(d.CoordOf(3), (MeshCoord{1, 0, 0}));
  EXPECT_EQ(d.CoordOf(6), (MeshCoord{0, 0, 1}));
}

// Sum of (1 << world rank) over a group identifies exactly which ranks are in it.
int64_t GroupMask(comm::Communicator& group, int world_rank) {
  int64_t v = int64_t{1} << world_rank, out = 0;
  Status s = group.Allreduce(&v, &out, 1, comm::DType::kI64, comm::ReduceOp::kSum)->Wait();
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

TEST(DeviceMesh, GroupsHoldTheRanksThatShareTheOtherCoordinates) {
  ParallelDims dims{2, 2, 2};
  comm::ThreadsWorld world(8);
  std::vector<std::thread> threads;
  std::vector<int> failures(8, 0);
  for (int r = 0; r < 8; ++r) {
    threads.emplace_back([&, r] {
      auto mesh = BuildMesh(world.Rank(r), dims);
      if (!mesh.ok()) {
        failures[r] = 1;
        return;
      }
      const MeshCoord c = mesh->coord;
      EXPECT_EQ(mesh->dp->size(), 2);
      EXPECT_EQ(mesh->tp->size(), 2);
      EXPECT_EQ(mesh->pp->size(), 2);
      EXPECT_EQ(mesh->dp->rank(), c.dp);
      EXPECT_EQ(mesh->tp->rank(), c.tp);
      EXPECT_EQ(mesh->pp->rank(), c.pp);
      auto mask_of = [&](auto vary) {
        int64_t m = 0;
        for (int i = 0; i < 2; ++i) m |= int64_t{1} << dims.RankOf(vary(i));
        return m;
      };
      EXPECT_EQ(GroupMask(*mesh->tp, r), mask_of([&](int i) { return MeshCoord{c.dp, i, c.pp}; }));
      EXPECT_EQ(GroupMask(*mesh->dp, r), mask_of([&](int i) { return MeshCoord{i, c.tp, c.pp}; }));
      EXPECT_EQ(GroupMask(*mesh->pp, r), mask_of([&](int i) { return MeshCoord{c.dp, c.tp, i}; }));
    });
  }
  for (auto& t : threads) t.join();
  for (int f : failures) EXPECT_EQ(f, 0);
}

TEST(DeviceMesh, RefusesAWorldOfAnotherSize) {
  comm::ThreadsWorld world(1);
  auto mesh = BuildMesh(world.Rank(0), ParallelDims{2, 1, 1});
  EXPECT_FALSE(mesh.ok());
}

}  // namespace
}  // namespace lockstep::parallel
