// Writing and reading back whole checkpoints: world 1 and 3, every dtype, uneven ranges,
// several pieces of one tensor per rank, the safetensors layout itself, argument checks.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "checkpoint/checkpoint_test_util.h"
#include "lockstep/checkpoint/paths.h"
#include "lockstep/checkpoint/reader.h"
#include "lockstep/checkpoint/resolve.h"
#include "lockstep/checkpoint/writer.h"
#include "lockstep/core/hash.h"

namespace lockstep::checkpoint {
namespace {

using namespace testing;

std::vector<std::string> Children(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

class RoundTrip : public ::testing::TestWithParam<int> {};

TEST_P(RoundTrip, WritesReadsAndVerifies) {
  const int world = GetParam();
  TempDir tmp;
  const std::string root = tmp.Sub("checkpoints");
  std::vector<TestTensor> model = MakeModel(7);
  ASSERT_TRUE(WriteCheckpoint(root, 12, model, world).ok());

  std::vector<std::string> expect_root = {"latest", "step-00000012"};
  EXPECT_EQ(Children(root), expect_root);
  std::vector<std::string> expect_dir = {"manifest.json"};
  for (int r = 0; r < world; ++r) expect_dir.push_back(ShardFileName(r));
  std::sort(expect_dir.begin(), expect_dir.end());
  EXPECT_EQ(Children(root + "/step-00000012"), expect_dir);
  EXPECT_EQ(ReadAll(root + "/latest"), "step-00000012\n");

  Result<std::string> latest = ResolveLatest(root);
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(*latest, root + "/step-00000012");
  Result<Checkpoint> c = Checkpoint::Open(*latest);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->step(), 12);
  EXPECT_EQ(c->world(), world);
  EXPECT_EQ(c->format_version(), 1);
  EXPECT_EQ(c->extra()["config_hash"], "cfg-1");
  EXPECT_EQ(c->extra()["step"], 12);
  ASSERT_EQ(c->tensors().size(), model.size());
  EXPECT_TRUE(std::is_sorted(c->tensors().begin(), c->tensors().end(),
                             [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; }));
  const TensorInfo* wte = c->Find("wte");
  ASSERT_NE(wte, nullptr);
  EXPECT_EQ(wte->dtype, DType::kF32);
  EXPECT_EQ(wte->shape, (std::vector<int64_t>{37, 16}));
  EXPECT_EQ(wte->numel, 37 * 16);
  ASSERT_EQ(wte->shards.size(), static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    auto [b, e] = SplitRange(37 * 16, r, world);
    EXPECT_EQ(wte->shards[r].file, ShardFileName(r));
    EXPECT_EQ(wte->shards[r].begin, b);
    EXPECT_EQ(wte->shards[r].end, e);
    EXPECT_EQ(wte->shards[r].bytes, static_cast<uint64_t>((e - b) * 4));
    const TestTensor& t = model[0];
    EXPECT_EQ(wte->shards[r].xxh64, Xxh64(t.bytes.data() + b * 4, static_cast<size_t>((e - b) * 4)));
  }
  EXPECT_TRUE(c->Verify().ok());
  Status s = ExpectModel(*latest, model);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(c->CheckConfigHash("cfg-1").ok());
}

INSTANTIATE_TEST_SUITE_P(Worlds, RoundTrip, ::testing::Values(1, 3));

// The shard file is plain safetensors: a whole tensor appears under its own name with its
// global shape, data_offsets relative to an 8-aligned data section.
TEST(RoundTripFormat, ShardIsSafetensors) {
  TempDir tmp;
  std::vector<TestTensor> model = MakeModel(3);
  ASSERT_TRUE(WriteCheckpoint(tmp.path(), 5, model, 1).ok());
  const std::string path = tmp.path() + "/step-00000005/rank-00000.safetensors";
  std::string all = ReadAll(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(all[i]);
  EXPECT_EQ((8 + n) % 8, 0u);
  nlohmann::json h = nlohmann::json::parse(all.substr(8, n));
  EXPECT_EQ(h["wte"]["dtype"], "F32");
  EXPECT_EQ(h["wte"]["shape"], nlohmann::json::array({37, 16}));
  EXPECT_EQ(h["opt.step"]["shape"], nlohmann::json::array());
  EXPECT_EQ(h["__metadata__"]["lockstep.format_version"], "1");
  EXPECT_EQ(h["__metadata__"]["wte:range"], "0,592");
  EXPECT_EQ(h["__metadata__"]["wte:global_shape"], "37,16");
  uint64_t b = h["wte"]["data_offsets"][0], e = h["wte"]["data_offsets"][1];
  ASSERT_EQ(e - b, model[0].bytes.size());
  EXPECT_EQ(std::memcmp(all.data() + 8 + n + b, model[0].bytes.data(), e - b), 0);
  uint64_t total = 0;
  for (const TestTensor& t : model) total += t.bytes.size();
  EXPECT_EQ(all.size(), 8 + n + total);
}

// A rank may hold several pieces of one tensor (e.g. a column slice of a row-major matrix is
// one piece per row); they are stored under name#i keys.
TEST(RoundTripPieces, SeveralPiecesPerRank) {
  TempDir tmp;
  TestTensor w = MakeTensor("w", DType::kF32, {4, 6}, 1);
  // Rank r holds columns [3r, 3r + 3) of every row: 4 pieces of 3 elements each.
  std::vector<Status> st(2);
  std::vector<CheckpointWriter> writers;
  for (int r = 0; r < 2; ++r) {
    Result<CheckpointWriter> wr = CheckpointWriter::Begin(tmp.path(), 1, r, 2);
    ASSERT_TRUE(wr.ok());
    std::vector<ShardRef> pieces;
    for (int row = 0; row < 4; ++row) {
      int64_t b = row * 6 + 3 * r;
      pieces.push_back(ShardRef{"w", w.shape, w.dtype, w.bytes.data() + b * 4, b, b + 3});
    }
    ASSERT_TRUE(wr->WriteShard(pieces).ok());
    writers.push_back(std::move(wr).value());
  }
  ASSERT_TRUE(writers[0].Commit(nullptr).ok());
  Result<Checkpoint> c = Checkpoint::Open(tmp.path() + "/step-00000001");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->Find("w")->shards.size(), 8u);
  EXPECT_EQ(c->Find("w")->shards[1].key, "w#0");
  EXPECT_EQ(c->Find("w")->shards[1].file, "rank-00001.safetensors");
  EXPECT_TRUE(ExpectModel(tmp.path() + "/step-00000001", {w}).ok());
  EXPECT_TRUE(c->extra().is_object() && c->extra().empty());
}

TEST(RoundTripArgs, RejectsBadPiecesAndCalls) {
  TempDir tmp;
  float x[4] = {1, 2, 3, 4};
  EXPECT_EQ(CheckpointWriter::Begin(tmp.path(), -1, 0, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckpointWriter::Begin(tmp.path(), 1, 2, 2).status().code(), StatusCode::kInvalidArgument);
  Result<CheckpointWriter> w = CheckpointWriter::Begin(tmp.path(), 1, 0, 1);
  ASSERT_TRUE(w.ok());
  auto bad = [&](ShardRef p) { return w->WriteShard({p}); };
  EXPECT_EQ(bad({"x", {4}, DType::kF32, x, 0, 5}).code(), StatusCode::kInvalidArgument);  // past numel
  EXPECT_EQ(bad({"x", {4}, DType::kF32, x, 3, 2}).code(), StatusCode::kInvalidArgument);  // begin > end
  EXPECT_EQ(bad({"x", {4}, DType::kF32, nullptr, 0, 4}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad({"", {4}, DType::kF32, x, 0, 4}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad({"a\nb", {4}, DType::kF32, x, 0, 4}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad({"x", {-1}, DType::kF32, x, 0, 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad({"x", {1ll << 40, 1ll << 40}, DType::kF32, x, 0, 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(w->WriteShard({{"x", {4}, DType::kF32, x, 0, 2}, {"x", {4}, DType::kI32, x + 2, 2, 4}}).code(),
            StatusCode::kInvalidArgument);  // pieces disagree on dtype
  EXPECT_EQ(w->Commit(nlohmann::json::array()).code(), StatusCode::kInvalidArgument);
  Result<CheckpointWriter> w1 = CheckpointWriter::Begin(tmp.path(), 1, 1, 2);
  ASSERT_TRUE(w1.ok());
  EXPECT_EQ(w1->Commit(nullptr).code(), StatusCode::kInvalidArgument);  // only rank 0 commits
}

// Pieces that leave a gap or overlap are refused at Commit, naming the tensor; latest stays.
TEST(RoundTripArgs, BadTilingRefused) {
  struct Case {
    int64_t b0, e0, b1, e1;
    const char* what;
  };
  for (const Case& k :
       {Case{0, 4, 5, 10, "gap [4, 5)"}, Case{0, 6, 5, 10, "overlaps"}, Case{0, 4, 4, 9, "[9, 10) are in no shard"}}) {
    TempDir tmp;
    ASSERT_TRUE(WriteCheckpoint(tmp.path(), 1, MakeModel(1), 1).ok());
    std::vector<float> x(10, 1.0f);
    std::vector<CheckpointWriter> writers;
    for (int r = 0; r < 2; ++r) {
      Result<CheckpointWriter> w = CheckpointWriter::Begin(tmp.path(), 2, r, 2);
      ASSERT_TRUE(w.ok());
      int64_t b = r ? k.b1 : k.b0, e = r ? k.e1 : k.e0;
      ASSERT_TRUE(w->WriteShard({{"layer.w", {2, 5}, DType::kF32, x.data() + b, b, e}}).ok());
      writers.push_back(std::move(w).value());
    }
    Status s = writers[0].Commit(nullptr);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("tensor 'layer.w'"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(k.what), std::string::npos) << s.message();
    EXPECT_EQ(*ResolveLatest(tmp.path()), tmp.path() + "/step-00000001");
    EXPECT_FALSE(std::filesystem::exists(tmp.path() + "/step-00000002"));
  }
}

// Leftovers of a crashed attempt at the same step (a shard of a rank that no longer exists,
// an old manifest) are cleaned by Commit; saving a step that already exists replaces it.
TEST(RoundTripRetry, StaleTmpCleanedAndStepReplaced) {
  TempDir tmp;
  const std::string stale = tmp.path() + "/step-00000004.tmp";
  std::filesystem::create_directories(stale);
  WriteAll(stale + "/rank-00007.safetensors", "junk");
  WriteAll(stale + "/manifest.json", "junk");
  WriteAll(stale + "/rank-00000.safetensors", "junk");
  std::vector<TestTensor> a = MakeModel(1), b = MakeModel(2);
  ASSERT_TRUE(WriteCheckpoint(tmp.path(), 4, a, 2).ok());
  EXPECT_EQ(Children(tmp.path() + "/step-00000004"),
            (std::vector<std::string>{"manifest.json", "rank-00000.safetensors", "rank-00001.safetensors"}));
  EXPECT_TRUE(ExpectModel(tmp.path() + "/step-00000004", a).ok());
  ASSERT_TRUE(WriteCheckpoint(tmp.path(), 4, b, 3).ok());
  EXPECT_TRUE(ExpectModel(tmp.path() + "/step-00000004", b).ok());
  EXPECT_EQ(Children(tmp.path()), (std::vector<std::string>{"latest", "step-00000004"}));
}

// Where the file system cannot swap two directories atomically, re-saving a step falls back
// to delete-then-rename.
TEST(RoundTripRetry, StepReplacedWithoutExchange) {
  struct NoExchange final : ForwardingEnv {
    Status ExchangePaths(const std::string& a, const std::string& b) override {
      return Status::Unimplemented(a + " <-> " + b + ": not here");
    }
  } env;
  TempDir tmp;
  std::vector<TestTensor> a = MakeModel(1), b = MakeModel(2);
  ASSERT_TRUE(WriteCheckpoint(tmp.path(), 4, a, 2, {&env, 0}).ok());
  ASSERT_TRUE(WriteCheckpoint(tmp.path(), 4, b, 2, {&env, 0}).ok());
  EXPECT_TRUE(ExpectModel(tmp.path() + "/step-00000004", b).ok());
  EXPECT_EQ(Children(tmp.path()), (std::vector<std::string>{"latest", "step-00000004"}));
}

}  // namespace
}  // namespace lockstep::checkpoint
