// The test Env itself: counting, failing the N-th mutation, crash mode, torn writes, and
// what a simulated power loss keeps.
#include <gtest/gtest.h>

#include <filesystem>

#include "checkpoint/checkpoint_test_util.h"
#include "lockstep/checkpoint/fault_env.h"

namespace lockstep::checkpoint {
namespace {

using namespace testing;

TEST(FaultEnv, FailsNthMutationAndLaterOnesWhenCrashed) {
  TempDir tmp;
  FaultInjectionEnv env(Env::Default());
  env.FailAt(3, /*crash=*/true);
  Result<std::unique_ptr<WritableFile>> f = env.NewWritableFile(tmp.Sub("a"));  // 1
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE((*f)->Append("0123456789", 10).ok());  // 2
  Status s = (*f)->Append("abcdefgh", 8);            // 3: fails, torn
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("injected fault at append (mutation 3)"), std::string::npos);
  EXPECT_FALSE((*f)->Sync().ok());                 // 4: crashed
  EXPECT_FALSE(env.CreateDir(tmp.Sub("d")).ok());  // 5
  EXPECT_TRUE(env.fault_hit());
  EXPECT_EQ(env.mutations(), 5);
  EXPECT_EQ(ReadAll(tmp.Sub("a")), "0123456789abcd");
  EXPECT_EQ(env.log()[2], "3 append " + tmp.Sub("a"));
}

TEST(FaultEnv, SingleFailureThenContinues) {
  TempDir tmp;
  FaultInjectionEnv env(Env::Default());
  env.FailAt(1, /*crash=*/false);
  EXPECT_FALSE(env.CreateDir(tmp.Sub("x")).ok());
  EXPECT_TRUE(env.CreateDir(tmp.Sub("y")).ok());
  EXPECT_FALSE(std::filesystem::exists(tmp.Sub("x")));
  EXPECT_TRUE(std::filesystem::is_directory(tmp.Sub("y")));
}

TEST(FaultEnv, DropUnsyncedData) {
  TempDir tmp;
  FaultInjectionEnv env(Env::Default());
  // synced file in a synced directory: kept, cut back to its synced size
  auto a = env.NewWritableFile(tmp.Sub("a"));
  ASSERT_TRUE((*a)->Append("durable", 7).ok());
  ASSERT_TRUE((*a)->Sync().ok());
  ASSERT_TRUE(env.SyncDir(tmp.path()).ok());
  ASSERT_TRUE((*a)->Append("-lost", 5).ok());
  ASSERT_TRUE((*a)->Close().ok());
  // synced file whose directory entry was never synced: gone
  auto b = env.NewWritableFile(tmp.Sub("b"));
  ASSERT_TRUE((*b)->Append("x", 1).ok());
  ASSERT_TRUE((*b)->Sync().ok());
  ASSERT_TRUE((*b)->Close().ok());
  // renamed over a durable file: the rename stands
  WriteAll(tmp.Sub("latest"), "old");
  auto c = env.NewWritableFile(tmp.Sub("latest.tmp"));
  ASSERT_TRUE((*c)->Append("new", 3).ok());
  ASSERT_TRUE((*c)->Sync().ok());
  ASSERT_TRUE((*c)->Close().ok());
  ASSERT_TRUE(env.RenameFile(tmp.Sub("latest.tmp"), tmp.Sub("latest")).ok());
  ASSERT_TRUE(env.DropUnsyncedData().ok());
  EXPECT_EQ(ReadAll(tmp.Sub("a")), "durable");
  EXPECT_FALSE(std::filesystem::exists(tmp.Sub("b")));
  EXPECT_EQ(ReadAll(tmp.Sub("latest")), "new");
}

}  // namespace
}  // namespace lockstep::checkpoint
