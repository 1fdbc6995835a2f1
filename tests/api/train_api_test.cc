// The library's entry points from a program's side: the trainer's flags over a program's
// defaults, bad options and bad jobs as Status values (never an abort or an exit), and a
// user-defined model trained in this process with the same bits on 1 and 2 workers.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "lockstep/lockstep.h"

namespace lockstep {
namespace {

constexpr int64_t kIn = 3;

// y = x0 - 2 x1 + x2 / 2 learned by one linear layer.
class LinearRegression : public Model {
 public:
  LinearRegression() {
    fc_ = nn::Linear::TorchDefault(ps_, "fc", kIn, 1, true);
    ps_.Finalize(1);
  }
  ParameterStore& params() override { return ps_; }
  const ParameterStore& params() const override { return ps_; }
  std::string name() const override { return "linreg"; }
  Status CheckLayout(const SampleLayout& l) const override {
    return l.features == kIn && l.values == 1 ? Status::Ok() : Status::InvalidArgument("linreg: got " + l.ToString());
  }
  Variable Loss(Tape& tape, const ModelInput& in) override {
    return nn::MseLossForward(tape, fc_.Forward(tape, nn::FloatInput(tape, in.features, {in.batch, kIn})), in.values);
  }

 private:
  ParameterStore ps_;
  nn::Linear fc_;
};

// LinearRegression with a trailing parameter its loss never uses, and no DeclareParams in its
// Loss(): the trainer must tell the tape how many parameters there are, or that last one's
// gradient would never be reported ready and DDP's last bucket would never go.
class WithUnusedParameter : public Model {
 public:
  WithUnusedParameter() {
    fc_ = nn::Linear::TorchDefault(ps_, "fc", kIn, 1, true);
    ps_.Add("unused", {4}, nn::Init::Zeros(), /*decay=*/false);
    ps_.Finalize(1);
  }
  ParameterStore& params() override { return ps_; }
  const ParameterStore& params() const override { return ps_; }
  std::string name() const override { return "linreg+unused"; }
  Status CheckLayout(const SampleLayout&) const override { return Status::Ok(); }
  Variable Loss(Tape& tape, const ModelInput& in) override {
    return nn::MseLossForward(tape, fc_.Forward(tape, nn::FloatInput(tape, in.features, {in.batch, kIn})), in.values);
  }

 private:
  ParameterStore ps_;
  nn::Linear fc_;
};

class Plane : public DataSource {
 public:
  explicit Plane(int64_t n, SampleLayout layout = {.features = kIn, .values = 1}) : n_(n), layout_(layout) {}
  int64_t size() const override { return n_; }
  SampleLayout layout() const override { return layout_; }
  Status Read(const SampleKey& key, const SampleSlot& out) const override {
    Rng rng(3, 0, static_cast<uint64_t>(key.index) * kIn);
    float* x = out.features;
    for (int64_t i = 0; i < kIn; ++i) x[i] = 2 * rng.Uniform() - 1;
    if (out.values) out.values[0] = x[0] - 2 * x[1] + 0.5f * x[2];
    if (out.label) *out.label = 7;  // outside a 2-class layout: the loader must refuse it
    return Status::Ok();
  }

 private:
  int64_t n_;
  SampleLayout layout_;
};

Job RegressionJob(SampleLayout layout = {.features = kIn, .values = 1}) {
  Job job;
  job.model = [](const Config&) -> Result<std::unique_ptr<Model>> { return std::make_unique<LinearRegression>(); };
  job.data = [layout](const Config&) -> Result<DataSources> {
    return DataSources{std::make_shared<Plane>(512, layout), std::make_shared<Plane>(128, layout)};
  };
  job.config_keys = {{"mine.scale", "float", "1.0", "a key of this program"}};
  return job;
}

TrainOptions Options(const std::string& out) {
  TrainOptions o;
  o.config_toml = "[optim]\nlr = 0.05\n[train]\nbatch_size = 32\nsteps = 40\nthreads = 1\n";
  o.out_dir = ::testing::TempDir() + "/" + out;
  std::filesystem::remove_all(o.out_dir);
  return o;
}

nlohmann::json DoneRow(const std::string& out_dir) {
  std::ifstream in(out_dir + "/metrics.jsonl");
  nlohmann::json last;
  for (std::string line; std::getline(in, line);) last = nlohmann::json::parse(line);
  return last;
}

TEST(ParseTrainFlags, FlagsOverTheProgramsDefaults) {
  TrainOptions defaults;
  defaults.overrides = {"train.steps=5"};
  defaults.nproc = 3;
  defaults.deterministic = true;
  const char* argv[] = {"prog", "--set", "optim.lr=0.1", "--backend", "mpi", "--mem-limit", "2K"};
  Result<TrainFlags> f = ParseTrainFlags(7, argv, defaults);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_FALSE(f->help);
  const TrainOptions* o = &f->options;
  EXPECT_EQ(o->overrides, (std::vector<std::string>{"train.steps=5", "optim.lr=0.1"}));
  EXPECT_EQ(o->nproc, 3);
  EXPECT_TRUE(o->deterministic);
  EXPECT_EQ(o->backend, "mpi");
  EXPECT_EQ(o->mem_limit, 2048);
  EXPECT_EQ(o->command, std::vector<std::string>{"prog"});

  const char* bad[] = {"prog", "--nprocs", "2"};
  Result<TrainFlags> b = ParseTrainFlags(3, bad);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("--nprocs"), std::string::npos) << b.status().message();
}

// --help is its own answer, not an error to recognise by its text: the flags are printed and
// the program is told to stop.
TEST(ParseTrainFlags, HelpIsReportedAsSuch) {
  const char* argv[] = {"prog", "--help"};
  ::testing::internal::CaptureStdout();
  Result<TrainFlags> f = ParseTrainFlags(2, argv);
  const std::string printed = ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE(f->help);
  EXPECT_NE(printed.find("--nproc"), std::string::npos) << printed;
  const char* run[] = {"prog", "--nproc", "2"};
  EXPECT_FALSE(ParseTrainFlags(3, run)->help);
}

TEST(Train, BadOptionsAndJobsAreStatusValues) {
  TrainOptions o = Options("bad");
  o.nproc = 0;
  EXPECT_EQ(Train(RegressionJob(), o).code(), StatusCode::kInvalidArgument);
  o = Options("bad");
  o.max_restarts = 1;  // no command line to restart: options built in code
  EXPECT_NE(Train(RegressionJob(), o).message().find("ParseTrainFlags"), std::string::npos);
  o = Options("bad");
  o.nproc = 2;
  o.layout = "tp=2";
  Status s = Train(RegressionJob(), o);
  EXPECT_NE(s.message().find("\"linreg\" trains data-parallel"), std::string::npos) << s.message();
  o = Options("own-key");
  o.overrides = {"mine.scale=2", "train.steps=2"};  // the job's own key is known...
  EXPECT_TRUE(Train(RegressionJob(), o).ok());
  o = Options("bad");
  o.overrides = {"mine.scale=2", "mine.scael=3"};  // ... a typo of it is not
  s = Train(RegressionJob(), o);
  EXPECT_NE(s.message().find("unknown config key 'mine.scael' (did you mean 'mine.scale'?)"), std::string::npos)
      << s.message();
  s = Train(RegressionJob({.features = kIn, .classes = 2}), Options("bad"));
  EXPECT_NE(s.message().find("linreg: got features=3, classes=2"), std::string::npos) << s.message();
  EXPECT_EQ(Train(Job{}, Options("bad")).code(), StatusCode::kInvalidArgument);
}

TEST(Train, ABadSampleStopsTheRunWithItsMessage) {
  Job job = RegressionJob({.features = kIn, .classes = 2, .values = 1});
  Status s = Train(job, Options("bad-sample"));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("has label 7, outside [0, 2)"), std::string::npos) << s.message();
}

TEST(Train, AUserModelLearnsWithTheSameBitsOnOneAndTwoWorkers) {
  std::string hashes[2], last_dir;
  for (int n : {1, 2}) {
    TrainOptions o = Options("linreg-" + std::to_string(n));
    last_dir = o.out_dir;
    o.nproc = n;
    o.deterministic = true;
    ASSERT_TRUE(Train(RegressionJob(), o).ok());
    nlohmann::json done = DoneRow(o.out_dir);
    EXPECT_EQ(done.value("event", ""), "done");
    hashes[n - 1] = done.value("weights_xxh64", "");
  }
  EXPECT_EQ(hashes[0].size(), 16u);
  EXPECT_EQ(hashes[0], hashes[1]);
  // It learned: the last validation loss is far below the targets' variance (~1.4).
  std::ifstream in(last_dir + "/metrics.jsonl");
  double val = -1;
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("val_loss")) val = j["val_loss"];
  }
  EXPECT_GE(val, 0);
  EXPECT_LT(val, 0.05);
}

// A model need not declare its parameters to the tape: on 2 data-parallel workers (DDP's
// bucketed allreduce, started from the gradient-ready hook) a parameter its loss never touches
// does not hold the step back, and both workers end with the same weights as one.
TEST(Train, AModelNeedNotDeclareItsParameters) {
  Job job = RegressionJob();
  job.model = [](const Config&) -> Result<std::unique_ptr<Model>> { return std::make_unique<WithUnusedParameter>(); };
  TrainOptions one = Options("unused-1"), two = Options("unused-2");
  for (TrainOptions* o : {&one, &two}) {
    o->overrides = {"train.steps=6"};
    o->deterministic = true;
  }
  two.nproc = 2;
  two.deterministic = false;  // DDP's hook path, not the deterministic tree
  ASSERT_TRUE(Train(job, one).ok());
  Status s = Train(job, two);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(DoneRow(two.out_dir)["event"], "done");
}

}  // namespace
}  // namespace lockstep
