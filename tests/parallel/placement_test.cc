// TensorPlacement: element runs of row blocks, column blocks and whole tensors, and their
// restriction to a range of the local tensor (a ZeRO shard).
#include "lockstep/parallel/placement.h"

#include <gtest/gtest.h>

namespace lockstep::parallel {
namespace {

bool operator==(const ElementRun& a, const ElementRun& b) {
  return a.global == b.global && a.local == b.local && a.count == b.count;
}

TEST(TensorPlacement, WholeTensorIsOneRun) {
  TensorPlacement p = TensorPlacement::Whole("w", {4, 3});
  EXPECT_EQ(p.numel(), 12);
  EXPECT_EQ(p.local_shape(), (tensor::Shape{4, 3}));
  ASSERT_EQ(p.Runs().size(), 1u);
  EXPECT_TRUE(p.Runs()[0] == (ElementRun{0, 0, 12}));
}

TEST(TensorPlacement, RowBlocksOfQkvAreThreeRuns) {
  // [3C, C] with C = 4, tp = 2, rank 1: rows 2-3 of each of q, k, v.
  TensorPlacement p = TensorPlacement::Rows("qkv", {12, 4}, {{2, 4}, {6, 8}, {10, 12}});
  EXPECT_EQ(p.local_shape(), (tensor::Shape{6, 4}));
  std::vector<ElementRun> r = p.Runs();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(r[0] == (ElementRun{8, 0, 8}));
  EXPECT_TRUE(r[1] == (ElementRun{24, 8, 8}));
  EXPECT_TRUE(r[2] == (ElementRun{40, 16, 8}));
  // A 1-D bias with the same rows.
  TensorPlacement b = TensorPlacement::Rows("qkv.bias", {12}, {{2, 4}, {6, 8}, {10, 12}});
  EXPECT_EQ(b.local_shape(), (tensor::Shape{6}));
  EXPECT_TRUE(b.Runs()[1] == (ElementRun{6, 2, 2}));
}

TEST(TensorPlacement, ColumnBlockIsOneRunPerRow) {
  TensorPlacement p = TensorPlacement::Cols("proj", {3, 4}, 2, 4);
  EXPECT_EQ(p.local_shape(), (tensor::Shape{3, 2}));
  std::vector<ElementRun> r = p.Runs();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(r[0] == (ElementRun{2, 0, 2}));
  EXPECT_TRUE(r[2] == (ElementRun{10, 4, 2}));
}

TEST(TensorPlacement, RunsWithinClipToALocalRange) {
  TensorPlacement p = TensorPlacement::Cols("proj", {3, 4}, 2, 4);  // local [3, 2]
  std::vector<ElementRun> r = p.RunsWithin(1, 4);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(r[0] == (ElementRun{3, 1, 1}));
  EXPECT_TRUE(r[1] == (ElementRun{6, 2, 2}));
  EXPECT_TRUE(p.RunsWithin(6, 6).empty());
  TensorPlacement w = TensorPlacement::Whole("w", {4, 3});
  ASSERT_EQ(w.RunsWithin(5, 9).size(), 1u);
  EXPECT_TRUE(w.RunsWithin(5, 9)[0] == (ElementRun{5, 5, 4}));
}

}  // namespace
}  // namespace lockstep::parallel
