// ResolveCheckpointPath: the four ways a user names a checkpoint (a step directory, a
// checkpoints root, its `latest` file, a run directory) all mean the same step directory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "lockstep/checkpoint/resolve.h"

namespace lockstep::checkpoint {
namespace {

namespace fs = std::filesystem;

TEST(ResolveCheckpointPath, EveryWayOfNamingACheckpointMeansItsStepDirectory) {
  const fs::path run = fs::temp_directory_path() / ("lockstep-resolve-" + std::to_string(::getpid()));
  fs::remove_all(run);
  const fs::path root = run / "checkpoints";
  fs::create_directories(root / "step-00000004");
  fs::create_directories(root / "step-00000008");
  std::ofstream(root / "latest") << "step-00000008\n";
  const std::string want = (root / "step-00000008").string();
  for (const fs::path& p : {root / "step-00000008", root, root / "latest", run}) {
    auto r = ResolveCheckpointPath(p.string());
    ASSERT_TRUE(r.ok()) << p << ": " << r.status().message();
    EXPECT_EQ(fs::path(*r).lexically_normal(), fs::path(want).lexically_normal()) << p;
  }
  EXPECT_EQ(*ResolveCheckpointPath(run.string() + "/"), want);
  EXPECT_EQ(*ResolveCheckpointPath((root / "step-00000004").string()), (root / "step-00000004").string());
  // Not a checkpoint at all: returned as given, for the reader to reject by name.
  EXPECT_EQ(*ResolveCheckpointPath((run / "nothing").string()), (run / "nothing").string());
  // A `latest` naming a missing directory is an error, not a silent fallback.
  std::ofstream(root / "latest", std::ios::trunc) << "step-00000099\n";
  EXPECT_FALSE(ResolveCheckpointPath(run.string()).ok());
  fs::remove_all(run);
}

}  // namespace
}  // namespace lockstep::checkpoint
