// `lockstep inspect`: the table for a good checkpoint, BAD rows for a damaged one.
#include <gtest/gtest.h>

#include <sstream>

#include "checkpoint/checkpoint_test_util.h"
#include "lockstep/checkpoint/inspect.h"
#include "lockstep/checkpoint/reader.h"

namespace lockstep::checkpoint {
namespace {

using namespace testing;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(Inspect, GoodCheckpoint) {
  TempDir tmp;
  ASSERT_TRUE(
      WriteCheckpoint(tmp.path(), 30, MakeModel(1), 3, {}, {{"config_hash", "abc"}, {"layout", {{"dp", 3}}}}).ok());
  const std::string dir = tmp.path() + "/step-00000030";
  std::ostringstream out;
  ASSERT_TRUE(InspectToStream(dir, out).ok()) << out.str();
  std::vector<std::string> lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 1 + 1 + 7 + 2u) << out.str();
  EXPECT_EQ(lines[0], "checkpoint " + dir + ": format_version 1, step 30, written by 3 ranks");
  EXPECT_EQ(lines[1], "tensor       dtype  shape      shards  bytes  checksum");
  // Rows are name-sorted: empty, h.0.attn.w, h.0.ln.b, loader.perm, mask, opt.step, wte.
  EXPECT_EQ(lines[2], "empty        F32    [0, 4]          3      0  ok");
  EXPECT_EQ(lines[3], "h.0.attn.w   BF16   [16, 48]        3   1536  ok");
  EXPECT_EQ(lines[8], "wte          F32    [37, 16]        3   2368  ok");
  EXPECT_EQ(lines[9].rfind("total: 7 tensors, 4485 bytes of data in 3 files (", 0), 0u) << lines[9];
  EXPECT_NE(lines[9].find("checksums: 21/21 shards ok"), std::string::npos);
  EXPECT_EQ(lines[10], "extra: config_hash=abc layout={\"dp\":3}");
}

TEST(Inspect, ReportsBadShardsAfterPrintingEverything) {
  TempDir tmp;
  ASSERT_TRUE(WriteCheckpoint(tmp.path(), 30, MakeModel(1), 3).ok());
  const std::string dir = tmp.path() + "/step-00000030";
  Result<Checkpoint> c = Checkpoint::Open(dir);
  ASSERT_TRUE(c.ok());
  const ShardInfo& s = c->Find("wte")->shards[1];
  FlipByte(dir + "/" + s.file, s.offset + 5);
  std::ostringstream out;
  Status st = InspectToStream(dir, out);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  std::vector<std::string> lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 12u) << out.str();
  EXPECT_EQ(lines[8], "wte          F32    [37, 16]        3   2368  BAD 1/3: rank-00001.safetensors [98, 296)");
  EXPECT_NE(lines[9].find("checksums: 20/21 shards ok"), std::string::npos);
  EXPECT_EQ(lines[11].rfind("error: " + dir + "/rank-00001.safetensors: tensor 'wte': checksum mismatch", 0), 0u)
      << lines[11];
  EXPECT_EQ(st.message(), lines[11].substr(7));
}

TEST(Inspect, UnreadableCheckpoint) {
  TempDir tmp;
  std::ostringstream out;
  Status st = InspectToStream(tmp.path() + "/step-00000001", out);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_EQ(out.str(), "error: " + tmp.path() + "/step-00000001: missing checkpoint directory\n");
}

}  // namespace
}  // namespace lockstep::checkpoint
