// keep-K pruning, `latest`, and --resume auto's FindNewestValid.
#include <gtest/gtest.h>

#include <filesystem>

#include "checkpoint/checkpoint_test_util.h"
#include "lockstep/checkpoint/reader.h"
#include "lockstep/checkpoint/resolve.h"

namespace lockstep::checkpoint {
namespace {

using namespace testing;

std::vector<std::string> Children(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Retention, KeepsNewestK) {
  TempDir tmp;
  for (int step = 1; step <= 5; ++step) {
    ASSERT_TRUE(WriteCheckpoint(tmp.path(), step * 10, MakeModel(step), 2, {nullptr, 2}).ok());
  }
  EXPECT_EQ(Children(tmp.path()), (std::vector<std::string>{"latest", "step-00000040", "step-00000050"}));
  EXPECT_EQ(*ResolveLatest(tmp.path()), tmp.path() + "/step-00000050");
  EXPECT_TRUE(ExpectModel(tmp.path() + "/step-00000040", MakeModel(4)).ok());
}

TEST(Retention, KeepZeroKeepsAll) {
  TempDir tmp;
  for (int step = 1; step <= 3; ++step) ASSERT_TRUE(WriteCheckpoint(tmp.path(), step, MakeModel(step), 1).ok());
  EXPECT_EQ(ListCheckpoints(tmp.path())->size(), 3u);
}

// Newer checkpoints from an abandoned run (resumed from an older one) outrank the new save by
// step; pruning still never deletes the one `latest` names.
TEST(Retention, NeverDeletesLatestTarget) {
  TempDir tmp;
  ASSERT_TRUE(WriteCheckpoint(tmp.path(), 100, MakeModel(1), 1).ok());
  ASSERT_TRUE(WriteCheckpoint(tmp.path(), 200, MakeModel(2), 1).ok());
  ASSERT_TRUE(WriteCheckpoint(tmp.path(), 50, MakeModel(3), 1, {nullptr, 1}).ok());
  EXPECT_EQ(*ResolveLatest(tmp.path()), tmp.path() + "/step-00000050");
  EXPECT_EQ(Children(tmp.path()), (std::vector<std::string>{"latest", "step-00000050", "step-00000200"}));
  EXPECT_TRUE(ExpectModel(tmp.path() + "/step-00000050", MakeModel(3)).ok());
}

// Pruning removes half-deleted (.trash) directories and .tmp directories of older steps, but
// not a .tmp of a newer step nor anything it does not recognise.
TEST(Retention, CleansLeftovers) {
  TempDir tmp;
  for (const char* d : {"step-00000001.tmp", "step-00000002.trash", "step-00000009.tmp", "notes"}) {
    std::filesystem::create_directories(tmp.path() + "/" + d + "/x");
  }
  ASSERT_TRUE(WriteCheckpoint(tmp.path(), 5, MakeModel(1), 1, {nullptr, 3}).ok());
  EXPECT_EQ(Children(tmp.path()), (std::vector<std::string>{"latest", "notes", "step-00000005", "step-00000009.tmp"}));
}

TEST(FindNewestValid, SkipsCorruptNewest) {
  TempDir tmp;
  for (int step = 1; step <= 3; ++step) ASSERT_TRUE(WriteCheckpoint(tmp.path(), step, MakeModel(step), 2).ok());
  // Step 3: one data byte flipped (only a full verify sees it). Step 2: manifest torn.
  const std::string s3 = tmp.path() + "/step-00000003";
  FlipByte(s3 + "/rank-00001.safetensors", FileSize(s3 + "/rank-00001.safetensors") - 1);
  std::vector<std::string> warnings;
  Result<std::string> found = FindNewestValid(tmp.path(), &warnings);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, tmp.path() + "/step-00000002");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].rfind("skipping checkpoint " + s3 + ": " + s3 + "/rank-00001.safetensors: tensor '", 0), 0u)
      << warnings[0];
  EXPECT_NE(warnings[0].find("checksum mismatch"), std::string::npos);

  const std::string s2 = tmp.path() + "/step-00000002";
  Truncate(s2 + "/manifest.json", 100);
  warnings.clear();
  found = FindNewestValid(tmp.path(), &warnings);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, tmp.path() + "/step-00000001");
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[1].rfind("skipping checkpoint " + s2 + ": " + s2 + "/manifest.json: ", 0), 0u) << warnings[1];

  std::filesystem::remove(tmp.path() + "/step-00000001/rank-00000.safetensors");
  warnings.clear();
  found = FindNewestValid(tmp.path(), &warnings);
  EXPECT_EQ(found.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(found.status().message(), "no valid checkpoint under " + tmp.path() + " (3 skipped as invalid)");
  EXPECT_EQ(warnings.size(), 3u);
}

TEST(FindNewestValid, EmptyOrMissingRoot) {
  TempDir tmp;
  EXPECT_EQ(FindNewestValid(tmp.path(), nullptr).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(FindNewestValid(tmp.path() + "/nope", nullptr).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ResolveLatest(tmp.path()).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace lockstep::checkpoint
