// The elastic world planner and the host list: the largest world a run can go on
// with is one its plan accepts (batch, det_shards, tp x pp kept), and host lists parse or are
// refused with one line naming the entry.
#include "lockstep/runtime/setup/elastic_worlds.h"

#include <gtest/gtest.h>

#include <fstream>

#include "lockstep/runtime/setup/hosts.h"

namespace lockstep::runtime {
namespace {

TrainOptions Tiny(int nproc, bool deterministic, std::vector<std::string> extra = {}) {
  TrainOptions o;
  o.config_path = std::string(LOCKSTEP_SOURCE_DIR) + "/configs/gpt-tiny.toml";
  o.overrides = {"model.layers=1", "model.width=32", "model.heads=4", "model.context=32", "train.batch_size=12"};
  o.overrides.insert(o.overrides.end(), extra.begin(), extra.end());
  o.nproc = nproc;
  o.steps = 4;
  o.deterministic = deterministic;
  return o;
}

int Largest(const TrainOptions& o, int capacity, int min) {
  auto p = ElasticWorlds::Create(o);
  EXPECT_TRUE(p.ok()) << p.status().message();
  auto w = p->Largest(capacity, min);
  return w.ok() ? w->nproc : -static_cast<int>(w.status().code());
}

TEST(ElasticPlan, LargestWorldTheBatchAndShardsAllow) {
  // Default mode: batch 12 splits over 3 (and 4, 2, 1), not over 5.
  EXPECT_EQ(Largest(Tiny(4, false), 3, 1), 3);
  EXPECT_EQ(Largest(Tiny(6, false), 5, 1), 4);
  // Deterministic: det_shards = 4 must split over dp, and 12 over det_shards.
  EXPECT_EQ(Largest(Tiny(4, true, {"train.det_shards=4"}), 3, 1), 2);
  auto p = ElasticWorlds::Create(Tiny(4, true, {"train.det_shards=4"}));
  ASSERT_TRUE(p.ok());
  auto none = p->Largest(3, 3);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(none.status().message().find("train.det_shards=4"), std::string::npos) << none.status().message();
  auto below = p->Largest(1, 2);
  ASSERT_FALSE(below.ok());
  EXPECT_NE(below.status().message().find("1 workers left, below --min-nproc 2"), std::string::npos);
  EXPECT_EQ(p->total_steps(), 4);
}

TEST(ElasticPlan, DpShrinksTpAndPpStay) {
  TrainOptions o = Tiny(8, false);  // batch 12: dp 4 and dp 3 both split it
  o.layout = "dp=4,tp=2";
  auto p = ElasticWorlds::Create(o);
  ASSERT_TRUE(p.ok()) << p.status().message();
  auto w = p->Largest(7, 2);
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->nproc, 6);  // dp=3 x tp=2
  EXPECT_EQ(w->layout, "tp=2,pp=1");
  o.layout = "tp=4";
  o.nproc = 4;
  auto tp4 = ElasticWorlds::Create(o);
  ASSERT_TRUE(tp4.ok());
  EXPECT_NE(tp4->Refusal(3).find("needs a multiple of 4 workers"), std::string::npos);
  EXPECT_FALSE(tp4->Largest(3, 1).ok());
}

TEST(Hosts, ParseFormatAndRefuse) {
  auto h = ParseHosts("node1:2,node2,10.0.0.3:4");
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(FormatHosts(*h), "node1:2,node2:1,10.0.0.3:4");
  EXPECT_EQ(TotalSlots(*h), 7);
  EXPECT_NE(ParseHosts("a:2,a:1").status().message().find("'a' is listed twice"), std::string::npos);
  EXPECT_NE(ParseHosts("a:x").status().message().find("slots must be a positive integer"), std::string::npos);
  EXPECT_NE(ParseHosts("a,,b").status().message().find("is not HOST or HOST:SLOTS"), std::string::npos);
  const std::string path = ::testing::TempDir() + "/hosts";
  std::ofstream(path) << "# cluster\nnode1 slots=2 max_slots=4\n\nnode2  # one slot\n";
  auto f = ReadHostfile(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(FormatHosts(*f), "node1:2,node2:1");
  std::ofstream(path) << "node1 slots=0\n";
  EXPECT_NE(ReadHostfile(path).status().message().find(":1: 'slots=0'"), std::string::npos);
  EXPECT_EQ(ReadHostfile(path + ".missing").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace lockstep::runtime
