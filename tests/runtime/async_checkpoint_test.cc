// AsyncCheckpointSaver: an async save writes the state as it was when Save() was called, even
// though training changes it right after the snapshot; saves commit in step order; the sync
// mode writes the same tensors; a write error is reported, not swallowed.
#include "lockstep/runtime/recovery/async_checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "lockstep/checkpoint/reader.h"
#include "lockstep/checkpoint/resolve.h"

namespace lockstep::runtime {
namespace {

namespace fs = std::filesystem;

struct State {
  nn::ParameterStore params;
  std::vector<float> m, v;
  State() {
    params.Add("a.weight", {64, 100}, nn::Init::Uniform(0.1f), true);
    params.Add("a.bias", {100}, nn::Init::Uniform(0.1f), false);
    params.Finalize(7);
    m.resize(params.numel());
    v.resize(params.numel());
    std::iota(m.begin(), m.end(), 1.0f);
    std::iota(v.begin(), v.end(), 2.0f);
  }
  // What the trainer hands a one-writer save: every tensor whole, as "model."/"optim.<kind>."
  // pieces pointing at the live state.
  std::vector<parallel::LocalPiece> Pieces() const {
    std::vector<parallel::LocalPiece> out;
    for (const nn::ParamInfo& p : params) {
      out.push_back({"model." + p.name, p.shape, 0, p.numel, params.flat_params() + p.offset});
      out.push_back({"optim.exp_avg." + p.name, p.shape, 0, p.numel, m.data() + p.offset});
      out.push_back({"optim.exp_avg_sq." + p.name, p.shape, 0, p.numel, v.data() + p.offset});
    }
    return out;
  }
  int64_t Bytes() const { return params.numel() * 4 * 3; }
  // What an optimizer update does: every value changes.
  void Update() {
    for (int64_t i = 0; i < params.numel(); ++i) params.flat_params()[i] += 1.0f;
    for (float& x : m) x *= 2.0f;
  }
};

CheckpointContents Contents(int64_t step) {
  CheckpointContents c;
  c.step = step;
  c.optimizer_step = step;
  c.config_hash = "0123456789abcdef";
  return c;
}

std::string TempRoot(const char* name) {
  fs::path p = fs::temp_directory_path() / ("lockstep-async-" + std::string(name) + "-" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

// Reads tensor `name` of the checkpoint `dir` as floats.
std::vector<float> ReadTensor(const std::string& dir, const std::string& name, int64_t n) {
  auto ckpt = checkpoint::Checkpoint::Open(dir);
  EXPECT_TRUE(ckpt.ok()) << ckpt.status().message();
  std::vector<float> out(n);
  Status s = ckpt->Read(name, 0, n, out.data());
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

TEST(AsyncCheckpoint, WritesTheStateOfTheMomentOfSave) {
  const std::string root = TempRoot("moment");
  State st;
  const int64_t w = 64 * 100;
  std::vector<float> weight_at_save(st.params.flat_params(), st.params.flat_params() + w);
  std::vector<float> m_at_save(st.m.begin(), st.m.begin() + w);
  AsyncCheckpointSaver saver(root, 3, /*async=*/true);
  std::vector<SaveReport> finished;
  ASSERT_TRUE(saver.SavePieces(st.Pieces(), Contents(5), {}, {}, st.Bytes(), &finished).ok());
  EXPECT_TRUE(finished.empty());
  saver.WaitForSnapshot();
  st.Update();  // training goes on while the writer thread writes
  auto report = saver.Wait();
  ASSERT_TRUE(report.has_value());
  ASSERT_TRUE(report->ok()) << report->status().message();
  EXPECT_EQ((*report)->step, 5);
  EXPECT_TRUE((*report)->async);
  EXPECT_EQ((*report)->bytes, st.params.numel() * 4 * 3);
  EXPECT_GT((*report)->write_ms, 0);
  EXPECT_FALSE(saver.Wait().has_value());  // nothing in flight any more

  auto latest = checkpoint::ResolveLatest(root);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(ReadTensor(*latest, "model.a.weight", w), weight_at_save);
  EXPECT_EQ(ReadTensor(*latest, "optim.exp_avg.a.weight", w), m_at_save);
  fs::remove_all(root);
}

TEST(AsyncCheckpoint, SavesCommitInOrderAndSyncModeWritesTheSameTensors) {
  const std::string root = TempRoot("order"), sync_root = TempRoot("sync");
  State a, b;
  AsyncCheckpointSaver async_saver(root, 0, true), sync_saver(sync_root, 0, false);
  std::vector<SaveReport> finished;
  for (int64_t step = 1; step <= 3; ++step) {
    ASSERT_TRUE(async_saver.SavePieces(a.Pieces(), Contents(step), {}, {}, a.Bytes(), &finished).ok());
    async_saver.WaitForSnapshot();
    a.Update();
    std::vector<SaveReport> sync_finished;
    ASSERT_TRUE(sync_saver.SavePieces(b.Pieces(), Contents(step), {}, {}, b.Bytes(), &sync_finished).ok());
    ASSERT_EQ(sync_finished.size(), 1u);  // the sync save is done when Save returns
    EXPECT_FALSE(sync_finished[0].async);
    b.Update();
  }
  auto last = async_saver.Wait();
  ASSERT_TRUE(last && last->ok());
  // The second and third Save waited for their predecessor, in order.
  ASSERT_EQ(finished.size(), 2u);
  EXPECT_EQ(finished[0].step, 1);
  EXPECT_EQ(finished[1].step, 2);
  EXPECT_EQ((*last)->step, 3);
  for (int64_t step = 1; step <= 3; ++step) {
    char name[32];
    std::snprintf(name, sizeof(name), "/step-%08lld", static_cast<long long>(step));
    for (const char* t : {"model.a.weight", "model.a.bias", "optim.exp_avg.a.bias", "optim.exp_avg_sq.a.weight"}) {
      int64_t n = std::string(t).find("bias") != std::string::npos ? 100 : 6400;
      EXPECT_EQ(ReadTensor(root + name, t, n), ReadTensor(sync_root + name, t, n)) << t << " step " << step;
    }
  }
  fs::remove_all(root);
  fs::remove_all(sync_root);
}

TEST(AsyncCheckpoint, AWriteErrorIsReported) {
  const std::string root = TempRoot("error");
  { std::ofstream(root) << "a file where the checkpoints directory should be"; }
  State st;
  AsyncCheckpointSaver saver(root, 3, true);
  std::vector<SaveReport> finished;
  ASSERT_TRUE(saver.SavePieces(st.Pieces(), Contents(1), {}, {}, st.Bytes(), &finished).ok());
  auto r = saver.Wait();
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->ok());
  // Once reported, the failure does not block later saves: the next one tries again.
  ASSERT_TRUE(saver.SavePieces(st.Pieces(), Contents(2), {}, {}, st.Bytes(), &finished).ok());
  auto r2 = saver.Wait();
  ASSERT_TRUE(r2.has_value());
  EXPECT_FALSE(r2->ok());
  fs::remove(root);
}

}  // namespace
}  // namespace lockstep::runtime
