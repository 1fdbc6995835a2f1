// The test Env itself: counting, failing the N-th mutation, crash mode, torn writes, and
// what a simulated power loss keeps.
#include <gtest/gtest.h>

#include <filesystem>

#include "checkpoint/checkpoint_test_util.h"
#include "checkpoint/fault_env.h"

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

TEST(FaultEnv, DropUnsyncedDataKeepsSyncedBytesOfDurableNames) {
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
  EXPECT_EQ(env.pending_names(), 1);
  ASSERT_TRUE(env.DropUnsyncedData().ok());
  EXPECT_EQ(ReadAll(tmp.Sub("a")), "durable");
  EXPECT_FALSE(std::filesystem::exists(tmp.Sub("b")));
}

// latest.tmp written durably and renamed over a durable `latest`: without a sync of the
// directory the power loss undoes the rename (the old `latest` is back, latest.tmp gone with
// its own unsynced name); with it, the rename stands.
TEST(FaultEnv, ARenameIsDurableOnlyOnceItsDirectoryIsSynced) {
  for (bool sync_dir : {false, true}) {
    TempDir tmp;
    WriteAll(tmp.Sub("latest"), "old");
    FaultInjectionEnv env(Env::Default());
    ASSERT_TRUE(WriteFileDurably(&env, tmp.Sub("latest.tmp"), "new").ok());
    ASSERT_TRUE(env.RenameFile(tmp.Sub("latest.tmp"), tmp.Sub("latest")).ok());
    if (sync_dir) {
      ASSERT_TRUE(env.SyncDir(tmp.path()).ok());
    }
    EXPECT_EQ(env.pending_names(), sync_dir ? 0 : 2) << "sync_dir " << sync_dir;
    ASSERT_TRUE(env.DropUnsyncedData().ok());
    EXPECT_EQ(ReadAll(tmp.Sub("latest")), sync_dir ? "new" : "old");
    EXPECT_FALSE(std::filesystem::exists(tmp.Sub("latest.tmp")));
  }
}

// A directory renamed into place (a checkpoint's commit point) goes back to its old name with
// everything in it, and the files synced inside it keep their bytes; an exchange of two
// directories is swapped back; a removal stays removed.
TEST(FaultEnv, DirectoryRenamesAndExchangesAreUndoneRemovalsAreNot) {
  TempDir tmp;
  std::filesystem::create_directories(tmp.Sub("old"));
  WriteAll(tmp.Sub("old/shard"), "old shard");
  WriteAll(tmp.Sub("gone"), "x");
  FaultInjectionEnv env(Env::Default());
  ASSERT_TRUE(env.CreateDir(tmp.Sub("step.tmp")).ok());
  ASSERT_TRUE(WriteFileDurably(&env, tmp.Sub("step.tmp/shard"), "new shard").ok());
  ASSERT_TRUE(env.SyncDir(tmp.Sub("step.tmp")).ok());
  ASSERT_TRUE(env.RenameFile(tmp.Sub("step.tmp"), tmp.Sub("step")).ok());
  // The shard's own name, synced in its directory before the rename, is durable.
  EXPECT_EQ(env.pending_names(), 1);
  ASSERT_TRUE(env.ExchangePaths(tmp.Sub("step"), tmp.Sub("old")).ok());
  ASSERT_TRUE(env.RemoveFile(tmp.Sub("gone")).ok());
  EXPECT_EQ(ReadAll(tmp.Sub("step/shard")), "old shard");
  ASSERT_TRUE(env.DropUnsyncedData().ok());
  EXPECT_EQ(ReadAll(tmp.Sub("step.tmp/shard")), "new shard");
  EXPECT_EQ(ReadAll(tmp.Sub("old/shard")), "old shard");
  EXPECT_FALSE(std::filesystem::exists(tmp.Sub("step")));
  EXPECT_FALSE(std::filesystem::exists(tmp.Sub("gone")));
}

// A file created in a directory that is then renamed and synced under its new name: the sync
// covers the file's name too (the directory is the same one).
TEST(FaultEnv, ASyncUnderTheNewNameCoversNamesMadeUnderTheOld) {
  TempDir tmp;
  FaultInjectionEnv env(Env::Default());
  ASSERT_TRUE(env.CreateDir(tmp.Sub("d.tmp")).ok());
  ASSERT_TRUE(WriteFileDurably(&env, tmp.Sub("d.tmp/f"), "data").ok());
  ASSERT_TRUE(env.RenameFile(tmp.Sub("d.tmp"), tmp.Sub("d")).ok());
  ASSERT_TRUE(env.SyncDir(tmp.Sub("d")).ok());
  EXPECT_EQ(env.pending_names(), 1);  // the directory's own rename: its parent is not synced
  ASSERT_TRUE(env.SyncDir(tmp.path()).ok());
  EXPECT_EQ(env.pending_names(), 0);
  ASSERT_TRUE(env.DropUnsyncedData().ok());
  EXPECT_EQ(ReadAll(tmp.Sub("d/f")), "data");
}

}  // namespace
}  // namespace lockstep::checkpoint
