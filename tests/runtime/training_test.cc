// runtime/training and its checkpoint I/O in this process, without the lockstep binary: the
// StepReporter's rows (what a start, a resume, a step, a skipped step, a checkpoint and the end
// write, in which order, and the straggler it names), RankCheckpoints' round trip on one rank and
// on two replicated ranks (one writer), and the Trainer resuming in-process where its
// checkpoint is.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/comm/threads/threads_world.h"
#include "lockstep/nn/inputs.h"
#include "lockstep/nn/linear.h"
#include "lockstep/nn/model.h"
#include "lockstep/nn/mse_loss.h"
#include "lockstep/parallel/stage_model.h"
#include "lockstep/runtime/launch/train.h"
#include "lockstep/runtime/recovery/rank_checkpoints.h"
#include "lockstep/builtin_job.h"
#include "lockstep/runtime/training/step_reporter.h"

namespace lockstep::runtime {
namespace {

std::string FreshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/training-" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::vector<nlohmann::json> Rows(const std::string& dir) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

RunSetup SmallSetup(const std::string& dir) {
  RunSetup s;
  s.out_dir = dir;
  s.total_steps = 6;
  s.run.train.batch_size = 8;
  s.run.train.straggler_steps = 2;
  s.run.train.straggler_ratio = 1.5;
  s.config = *Config::Parse("[train]\nbatch_size = 8\n", "test");
  return s;
}

GatheredStep Gathered(double loss, std::vector<double> compute_ms) {
  GatheredStep g;
  g.loss = loss;
  g.wait_ms = 0.5;
  g.compute_ms = compute_ms;
  g.rank_wait_ms.assign(compute_ms.size(), 0.0);
  g.peer_group.assign(compute_ms.size(), 0);
  return g;
}

StepFigures Figures(int64_t step) {
  StepFigures f;
  f.step = step;
  f.lr = 1e-3;
  f.grad_norm = 2.0;
  f.step_ms = 100;  // 8 rows of 32 tokens in 0.1 s: 2560 tokens/s
  f.sync.exposed_ms = 2.0;
  f.train_flops_per_sample = 1e9;
  return f;
}

TEST(StepReporter, WritesEachRowOnceInOrderWithTheDoneRowLast) {
  const std::string dir = FreshDir("reporter");
  RunSetup setup = SmallSetup(dir);
  auto r = StepReporter::Open(setup, 0, /*keep_rows=*/false, RowUnits{32, true, false}, {"h0", "h1"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  StepReporter& rep = **r;
  ASSERT_TRUE(rep.Started({{"event", "start"}, {"step", 0}}, parallel::PipeSchedule::k1F1B).ok());
  ASSERT_TRUE(rep.Step(Figures(1), Gathered(5.5, {10, 10})).ok());
  ASSERT_TRUE(rep.Skipped(2, "wte.weight on rank 1", 1, "step 2: skipped").ok());
  ASSERT_TRUE(rep.Validation(2, 4.25, NAN, 512).ok());
  ASSERT_TRUE(rep.Checkpoint(SaveReport{2, 1.0, 20.0, 2'000'000, true}).ok());
  ASSERT_TRUE(rep.Done({{{"event", "memory"}, {"rank", 0}}}, "0123456789abcdef", 4.25, NAN).ok());
  const std::vector<nlohmann::json> rows = Rows(dir);
  ASSERT_EQ(rows.size(), 7u);
  EXPECT_EQ(rows[0]["event"], "start");  // no resume row, no pipeline row: pp = 1, step 0
  EXPECT_EQ(rows[1]["step"], 1);
  EXPECT_EQ(rows[1]["loss"], 5.5);
  EXPECT_DOUBLE_EQ(rows[1]["tokens_per_s"].get<double>(), 8 * 32 / 0.1);
  EXPECT_DOUBLE_EQ(rows[1]["gflops"].get<double>(), 1e9 * 8 / 0.1 * 1e-9);
  EXPECT_DOUBLE_EQ(rows[1]["exposed_comm_ms"].get<double>(), 2.0 - 0.5);  // beyond the wait for the slowest
  EXPECT_FALSE(rows[1].contains("samples_per_s"));                        // text: tokens
  EXPECT_EQ(rows[2],
            nlohmann::json(
                {{"step", 2}, {"skipped", "nonfinite_grad"}, {"where", "wte.weight on rank 1"}, {"consecutive", 1}}));
  EXPECT_EQ(rows[3], nlohmann::json({{"step", 2}, {"val_loss", 4.25}, {"val_tokens", 512}}));  // text: the targets counted
  EXPECT_EQ(rows[4]["event"], "checkpoint");
  EXPECT_DOUBLE_EQ(rows[4]["mb_per_s"].get<double>(), 100.0);  // 2 MB in 20 ms
  EXPECT_EQ(rows[5]["event"], "memory");
  EXPECT_EQ(rows[6], nlohmann::json({{"event", "done"}, {"step", 6}, {"weights_xxh64", "0123456789abcdef"}}));
}

// A resumed run keeps the rows up to its checkpoint (a torn last line and the lost steps'
// rows go) and says where it resumed.
TEST(StepReporter, AResumeKeepsTheRowsUpToItsStep) {
  const std::string dir = FreshDir("reporter-resume");
  {
    std::ofstream out(dir + "/metrics.jsonl");
    for (int s = 1; s <= 5; ++s) out << nlohmann::json({{"step", s}, {"loss", 1.0}}).dump() << "\n";
    out << "{\"step\": 6, \"lo";
  }
  RunSetup setup = SmallSetup(dir);
  setup.resume_dir = dir + "/checkpoints/step-00000003";
  auto r = StepReporter::Open(setup, 3, /*keep_rows=*/true, RowUnits{}, {"h0"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE((*r)->Started({{"event", "start"}, {"step", 3}}, parallel::PipeSchedule::k1F1B).ok());
  const std::vector<nlohmann::json> rows = Rows(dir);
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[2]["step"], 3);
  EXPECT_EQ(rows[4], nlohmann::json({{"event", "resume"}, {"step", 3}, {"checkpoint", setup.resume_dir}}));
}

// Rank 1 computes 3x its peers' median for train.straggler_steps steps after the warm-up
// step: it is named once, with its host.
TEST(StepReporter, NamesAStragglerOnceAfterItsWindow) {
  const std::string dir = FreshDir("reporter-straggler");
  RunSetup setup = SmallSetup(dir);
  auto r = StepReporter::Open(setup, 0, false, RowUnits{}, {"h0", "slowhost", "h2"});
  ASSERT_TRUE(r.ok());
  for (int64_t s = 1; s <= 5; ++s) ASSERT_TRUE((*r)->Step(Figures(s), Gathered(1.0, {10, 30, 10})).ok());
  std::vector<nlohmann::json> stragglers;
  for (const nlohmann::json& row : Rows(dir))
    if (row.value("event", "") == "straggler") stragglers.push_back(row);
  ASSERT_EQ(stragglers.size(), 1u);
  EXPECT_EQ(stragglers[0]["rank"], 1);
  EXPECT_EQ(stragglers[0]["host"], "slowhost");
  EXPECT_EQ(stragglers[0]["step"], 3);  // step 1 is warm-up; steps 2 and 3 fill the window
  EXPECT_DOUBLE_EQ(stragglers[0]["ratio"].get<double>(), 3.0);
}

// y = w.x + b, enough of a model for a checkpoint: two tensors.
class Tiny : public nn::Model {
 public:
  explicit Tiny(float fill) {
    fc_ = nn::Linear::TorchDefault(ps_, "fc", 3, 1, true);
    ps_.Finalize(1);
    for (int64_t i = 0; i < ps_.numel(); ++i) ps_.flat_params()[i] = fill + static_cast<float>(i);
  }
  nn::ParameterStore& params() override { return ps_; }
  const nn::ParameterStore& params() const override { return ps_; }
  std::string name() const override { return "tiny"; }
  Status CheckLayout(const SampleLayout&) const override { return Status::Ok(); }
  autograd::Variable Loss(autograd::Tape& tape, const nn::ModelInput& in) override {
    return nn::MseLossForward(tape, fc_.Forward(tape, nn::FloatInput(tape, in.features, {in.batch, 3})), in.values);
  }

 private:
  nn::ParameterStore ps_;
  nn::Linear fc_;
};

CheckpointContents ContentsAt(int64_t step, const RunSetup& setup) {
  CheckpointContents c;
  c.step = step;
  c.optimizer_step = step;
  c.config_hash = TrajectoryHash(setup.config);
  c.layout = {{"world", 1}};
  c.rng = {{"kind", "philox4x32-10"}, {"seed", 1}};
  return c;
}

// Saved from one model, loaded into another of the same shape: the same parameter and
// optimizer values come back, and a checkpoint past the run's last step is refused.
TEST(RankCheckpoints, OneRankRoundTrip) {
  const std::string dir = FreshDir("ckpt-one");
  RunSetup setup = SmallSetup(dir);
  setup.run.checkpoint.async = false;
  comm::ThreadsWorld world(1);
  parallel::WholeModel saved(std::make_unique<Tiny>(1.0f)), loaded(std::make_unique<Tiny>(-5.0f));
  const int64_t n = saved.params().numel();
  std::vector<float> moments(static_cast<size_t>(n), 0.25f), back(static_cast<size_t>(n), 0.0f);
  RankCheckpoints out(setup, world.Rank(0), parallel::MeshCoord{}, /*sharded=*/false);
  ASSERT_TRUE(out.Connect().ok());
  std::vector<SaveReport> finished;
  ASSERT_TRUE(out.Save(saved, {saved.params().flat_params(), 0, {0, n}}, {{"momentum", moments, 0}},
                       ContentsAt(4, setup), &finished)
                  .ok());
  ASSERT_EQ(finished.size(), 1u);  // synchronous: committed before Save returned
  EXPECT_EQ(finished[0].step, 4);
  setup.resume_dir = dir + "/checkpoints/step-00000004";
  RankCheckpoints in(setup, world.Rank(0), parallel::MeshCoord{}, false);
  Result<CheckpointContents> c = in.Load(loaded, {loaded.params().flat_params(), 0, {0, n}}, {{"momentum", back, 0}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->step, 4);
  EXPECT_EQ(std::vector<float>(loaded.params().flat_params(), loaded.params().flat_params() + n),
            std::vector<float>(saved.params().flat_params(), saved.params().flat_params() + n));
  EXPECT_EQ(back, moments);
  // Refused: a run that ends before the checkpoint's step, and a run of another recipe.
  setup.total_steps = 3;
  EXPECT_EQ(in.Load(loaded, {loaded.params().flat_params(), 0, {0, n}}, {{"momentum", back, 0}}).status().code(),
            StatusCode::kInvalidArgument);
  setup.total_steps = 6;
  setup.config = *Config::Parse("[train]\nbatch_size = 16\n", "other");
  Status foreign = in.Load(loaded, {loaded.params().flat_params(), 0, {0, n}}, {{"momentum", back, 0}}).status();
  EXPECT_NE(foreign.message().find("foreign checkpoint"), std::string::npos) << foreign.ToString();
}

// Two replicated ranks (no ZeRO, tp or pp): rank 0 writes everything alone, rank 1 nothing,
// and both load the whole state back.
TEST(RankCheckpoints, ReplicatedRanksHaveOneWriter) {
  const std::string dir = FreshDir("ckpt-two");
  RunSetup setup = SmallSetup(dir);
  setup.run.checkpoint.async = false;
  comm::ThreadsWorld world(2);
  std::vector<std::vector<SaveReport>> finished(2);
  std::vector<Status> saved(2), loaded(2);
  std::vector<std::vector<float>> params(2);
  auto rank = [&](int r) {
    parallel::WholeModel m(std::make_unique<Tiny>(2.0f));
    const int64_t n = m.params().numel();
    std::vector<float> moments(static_cast<size_t>(n), 0.5f);
    parallel::MeshCoord coord;
    coord.dp = r;
    RankCheckpoints io(setup, world.Rank(r), coord, /*sharded=*/false);
    saved[r] = io.Connect();
    if (saved[r].ok())
      saved[r] = io.Save(m, {m.params().flat_params(), 0, {0, n}}, {{"momentum", moments, 0}}, ContentsAt(2, setup),
                         &finished[r]);
  };
  std::thread t1(rank, 1);
  rank(0);
  t1.join();
  ASSERT_TRUE(saved[0].ok()) << saved[0].ToString();
  ASSERT_TRUE(saved[1].ok()) << saved[1].ToString();
  EXPECT_EQ(finished[0].size(), 1u);
  EXPECT_TRUE(finished[1].empty());  // rank 1 wrote nothing
  const std::string step = dir + "/checkpoints/step-00000002";
  EXPECT_TRUE(std::filesystem::exists(step + "/rank-00000.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(step + "/rank-00001.safetensors"));
}

// The Trainer in this process: a run of 6 steps, and the same run resumed from its step-3
// checkpoint, end with the same weights; the resumed run's metrics say where it resumed.
TEST(TrainerInProcess, ResumesWhereItsCheckpointIs) {
  TrainOptions o;
  o.config_path = LOCKSTEP_SOURCE_DIR "/configs/gpt-tiny.toml";
  o.overrides = {"model.layers=1",         "model.width=32",      "model.heads=2",  "model.context=32",
                 "train.batch_size=8",     "train.threads=1",     "eval.batches=1", "checkpoint.every=3",
                 "checkpoint.async=false", "optim.warmup_steps=1"};
  o.steps = 6;
  o.deterministic = true;
  o.out_dir = FreshDir("trainer-full");
  ASSERT_TRUE(RunTrain(BuiltinJob(), o).ok());
  const nlohmann::json full_done = Rows(o.out_dir).back();
  ASSERT_EQ(full_done["event"], "done");
  const std::string checkpoint = o.out_dir + "/checkpoints/step-00000003";
  o.out_dir = FreshDir("trainer-resumed");
  o.resume = checkpoint;
  ASSERT_TRUE(RunTrain(BuiltinJob(), o).ok());
  const std::vector<nlohmann::json> rows = Rows(o.out_dir);
  EXPECT_EQ(rows.back()["weights_xxh64"], full_done["weights_xxh64"]);
  int64_t resumed_at = -1, first_trained = -1;
  for (const nlohmann::json& row : rows) {
    if (row.value("event", "") == "resume") resumed_at = row["step"];
    if (row.contains("loss") && first_trained < 0) first_trained = row["step"];
  }
  EXPECT_EQ(resumed_at, 3);
  EXPECT_EQ(first_trained, 4);
}

}  // namespace
}  // namespace lockstep::runtime
