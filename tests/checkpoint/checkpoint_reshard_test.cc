// Resharding: a checkpoint written by 3 ranks read back in arbitrary element ranges, as a
// different number of ranks would, and reading only the bytes that are needed.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>

#include "checkpoint/checkpoint_test_util.h"
#include "lockstep/checkpoint/reader.h"

namespace lockstep::checkpoint {
namespace {

using namespace testing;

// Counts the bytes read through it, per file name suffix.
class CountingEnv final : public ForwardingEnv {
 public:
  struct File final : RandomAccessFile {
    File(std::unique_ptr<RandomAccessFile> base, std::atomic<uint64_t>* n) : base(std::move(base)), n(n) {}
    Result<size_t> Read(uint64_t offset, size_t size, void* out) const override {
      Result<size_t> r = base->Read(offset, size, out);
      if (r.ok()) *n += *r;
      return r;
    }
    std::unique_ptr<RandomAccessFile> base;
    std::atomic<uint64_t>* n;
  };
  Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path) override {
    LS_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, base_->NewRandomAccessFile(path));
    std::atomic<uint64_t>* counter = &other;
    for (int r = 0; r < 3; ++r) {
      if (path.size() >= 22 &&
          path.compare(path.size() - 22, 22, "rank-0000" + std::to_string(r) + ".safetensors") == 0) {
        counter = &rank[r];
      }
    }
    return std::unique_ptr<RandomAccessFile>(new File(std::move(f), counter));
  }
  void Reset() {
    for (auto& r : rank) r = 0;
    other = 0;
  }
  std::atomic<uint64_t> rank[3] = {0, 0, 0};
  std::atomic<uint64_t> other{0};
};

TEST(Reshard, ArbitraryRangesOfEveryTensor) {
  TempDir tmp;
  std::vector<TestTensor> model = MakeModel(11);
  ASSERT_TRUE(WriteCheckpoint(tmp.path(), 3, model, 3).ok());
  Result<Checkpoint> c = Checkpoint::Open(tmp.path() + "/step-00000003");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::mt19937_64 rng(5);
  for (const TestTensor& t : model) {
    const int64_t n = t.numel();
    for (int i = 0; i < 200; ++i) {
      int64_t b = n ? static_cast<int64_t>(rng() % (n + 1)) : 0;
      int64_t e = b + (n - b ? static_cast<int64_t>(rng() % (n - b + 1)) : 0);
      std::vector<char> got((e - b) * t.esize() + 1, '\x77');
      Status s = c->Read(t.name, b, e, got.data());
      ASSERT_TRUE(s.ok()) << t.name << " [" << b << ", " << e << "): " << s.ToString();
      if (e > b) {
        ASSERT_EQ(std::memcmp(got.data(), t.bytes.data() + b * t.esize(), (e - b) * t.esize()), 0)
            << t.name << " [" << b << ", " << e << ")";
      }
      ASSERT_EQ(got.back(), '\x77');
    }
  }
}

// Written by 3 ranks with uneven ranges, loaded by 1, 2, 4 and 5 ranks with even ranges:
// the concatenation of every new rank's slice is the original tensor.
TEST(Reshard, LoadWithOtherWorldSizes) {
  TempDir tmp;
  std::vector<TestTensor> model = MakeModel(12);
  ASSERT_TRUE(WriteCheckpoint(tmp.path(), 9, model, 3).ok());
  for (int m : {1, 2, 4, 5}) {
    for (const TestTensor& t : model) {
      std::vector<char> assembled(t.bytes.size());
      for (int r = 0; r < m; ++r) {
        Result<Checkpoint> c = Checkpoint::Open(tmp.path() + "/step-00000009");  // each rank opens its own
        ASSERT_TRUE(c.ok());
        int64_t b = t.numel() * r / m, e = t.numel() * (r + 1) / m;
        ASSERT_TRUE(c->Read(t.name, b, e, assembled.data() + b * t.esize()).ok());
      }
      EXPECT_EQ(assembled, t.bytes) << t.name << " loaded by " << m << " ranks";
    }
  }
}

// A range inside rank 2's piece touches only rank 2's file: the first time the whole piece
// (to check its xxh64), afterwards exactly the bytes asked for.
TEST(Reshard, ReadsOnlyNeededBytes) {
  TempDir tmp;
  std::vector<TestTensor> model = {MakeTensor("big", DType::kF32, {600, 100}, 1),
                                   MakeTensor("other", DType::kF32, {1000}, 2)};
  ASSERT_TRUE(WriteCheckpoint(tmp.path(), 1, model, 3).ok());
  CountingEnv env;
  Result<Checkpoint> c = Checkpoint::Open(tmp.path() + "/step-00000001", &env);
  ASSERT_TRUE(c.ok());
  env.Reset();
  const ShardInfo& piece = c->Find("big")->shards[2];
  ASSERT_EQ(piece.begin, 30000);  // rank 2 holds [30000, 60000)
  std::vector<float> out(1000);
  ASSERT_TRUE(c->Read("big", 40000, 41000, out.data()).ok());
  EXPECT_EQ(std::memcmp(out.data(), model[0].bytes.data() + 40000 * 4, 4000), 0);
  EXPECT_EQ(env.rank[0], 0u);
  EXPECT_EQ(env.rank[1], 0u);
  EXPECT_EQ(env.rank[2], piece.bytes);
  env.Reset();
  ASSERT_TRUE(c->Read("big", 50000, 51000, out.data()).ok());
  EXPECT_EQ(env.rank[2], 4000u);
  EXPECT_EQ(std::memcmp(out.data(), model[0].bytes.data() + 50000 * 4, 4000), 0);
  // A range across ranks 0 and 1 reads both of their pieces once, nothing of rank 2.
  env.Reset();
  std::vector<float> across(10000);
  ASSERT_TRUE(c->Read("big", 5000, 15000, across.data()).ok());
  EXPECT_EQ(env.rank[0], c->Find("big")->shards[0].bytes);
  EXPECT_EQ(env.rank[1], c->Find("big")->shards[1].bytes);
  EXPECT_EQ(env.rank[2], 0u);
  EXPECT_EQ(std::memcmp(across.data(), model[0].bytes.data() + 5000 * 4, 40000), 0);
}

TEST(Reshard, BadReadArguments) {
  TempDir tmp;
  std::vector<TestTensor> model = MakeModel(1);
  ASSERT_TRUE(WriteCheckpoint(tmp.path(), 1, model, 2).ok());
  Result<Checkpoint> c = Checkpoint::Open(tmp.path() + "/step-00000001");
  ASSERT_TRUE(c.ok());
  char buf[16];
  EXPECT_EQ(c->Read("nope", 0, 1, buf).code(), StatusCode::kNotFound);
  EXPECT_EQ(c->Read("wte", 5, 4, buf).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c->Read("wte", 0, 37 * 16 + 1, buf).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c->Read("wte", -1, 1, buf).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(c->Read("wte", 3, 3, nullptr).ok());  // empty range
}

}  // namespace
}  // namespace lockstep::checkpoint
