// Bad input gets one clear line and exit status 2 (DESIGN.md, CLI contract), never a crash.
#include <gtest/gtest.h>

#include <fstream>

#include "cli_test_util.h"

namespace lockstep::testing {
namespace {

// One line on stderr that mentions `needle`.
void ExpectUsageError(const CommandResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  size_t lines = 0;
  for (char c : r.err) lines += c == '\n';
  EXPECT_EQ(lines, 1u) << r.err;
}

TEST(CliErrors, HelpExitsZero) {
  CommandResult r = RunLockstep({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("train"), std::string::npos);
}

TEST(CliErrors, UnknownFlag) { ExpectUsageError(RunLockstep({"train", "--no-such-flag"}), "--no-such-flag"); }

TEST(CliErrors, MissingConfigFile) {
  ExpectUsageError(RunLockstep({"train", "--config", "/nonexistent.toml"}), "/nonexistent.toml");
}

TEST(CliErrors, BadFlagValue) {
  ExpectUsageError(RunLockstep({"train", "--config", "configs/gpt-tiny.toml", "--nproc", "zero"}), "--nproc");
  ExpectUsageError(RunLockstep({"train", "--config", "configs/gpt-tiny.toml", "--backend", "carrier-pigeon"}),
                   "--backend");
}

// --steps 0 is refused for what it is, not as a config that sets no step count.
TEST(CliErrors, ZeroStepsOrEpochs) {
  for (const char* flag : {"--steps", "--epochs"}) {
    const CommandResult r = RunLockstep({"train", "--config", "configs/gpt-tiny.toml", flag, "0"});
    ExpectUsageError(r, std::string(flag) + " 0: a run trains at least one step");
    EXPECT_EQ(r.err.find("sets neither"), std::string::npos) << r.err;
  }
}

TEST(CliErrors, UnknownConfigKey) {
  ExpectUsageError(RunLockstep({"train", "--config", "configs/gpt-tiny.toml", "--set", "optim.lr_typo=3"}),
                   "optim.lr_typo");
}

TEST(CliErrors, BadConfigValue) {
  ExpectUsageError(RunLockstep({"train", "--config", "configs/gpt-tiny.toml", "--set", "train.batch_size=-4"}),
                   "train.batch_size");
  ExpectUsageError(RunLockstep({"train", "--config", "configs/gpt-tiny.toml", "--set", "optim.lr=fast"}), "optim.lr");
  ExpectUsageError(RunLockstep({"train", "--config", "configs/gpt-tiny.toml", "--set", "model.heads=3"}), "model.");
}

TEST(CliErrors, MalformedConfigFile) {
  std::string dir = MakeTempDir("cfg");
  std::ofstream(dir + "/bad.toml") << "[train]\nbatch_size = = 3\n";
  ExpectUsageError(RunLockstep({"train", "--config", dir + "/bad.toml"}), "bad.toml:2");
}

TEST(CliErrors, MissingCorpusDirectory) {
  ExpectUsageError(RunLockstep({"train", "--config", "configs/gpt-tiny.toml", "--set", "data.dir=/nonexistent/corpus"}),
                   "/nonexistent/corpus");
}

TEST(CliErrors, MalformedImageFile) {
  std::string dir = MakeTempDir("idx");
  for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                        "t10k-labels-idx1-ubyte.gz"})
    std::ofstream(dir + "/" + f) << "not an idx file";
  ExpectUsageError(RunLockstep({"train", "--config", "configs/cnn-fashion.toml", "--set", "data.dir=" + dir}),
                   "train-images-idx3-ubyte.gz");
}

TEST(CliErrors, BatchNotDivisibleByWorkers) {
  ExpectUsageError(RunLockstep({"train", "--config", "configs/gpt-tiny.toml", "--nproc", "3"}), "divisible");
}

TEST(CliErrors, EvalMissingCheckpoint) {
  ExpectUsageError(RunLockstep({"eval", "--config", "configs/gpt-tiny.toml", "--checkpoint", "/nonexistent/ckpt"}),
                   "/nonexistent/ckpt");
}

}  // namespace
}  // namespace lockstep::testing

namespace lockstep::testing {
namespace {

// bench-comm checks every result exactly: a clean run exits 0, a bad op is a usage error.
TEST(BenchComm, SmallSweepPassesAndBadOpIsUsageError) {
  CommandResult ok = RunLockstep({"bench-comm", "--backend", "threads", "--nproc", "2", "--max-bytes", "64K"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("busbw"), std::string::npos) << ok.out;
  EXPECT_EQ(RunLockstep({"bench-comm", "--nproc", "2", "--op", "foo"}).exit_code, 2);
  EXPECT_EQ(RunLockstep({"bench-comm", "--min-bytes", "1M", "--max-bytes", "1K"}).exit_code, 2);
}

// bench-comm --hosts: checked as train checks its hosts, one line each, before any launch
// (the run across hosts itself: tests/scripts/slurm_test.sh).
TEST(BenchComm, BadHostsAreOneLine) {
  ExpectUsageError(RunLockstep({"bench-comm", "--hosts", "a:2,b:3"}),
                   "--hosts a:2,b:3: every host needs the same number of workers with one process a host");
  ExpectUsageError(RunLockstep({"bench-comm", "--hosts", "a:2,b:2", "--nproc", "6"}),
                   "--nproc 6 is more than the 4 slots of --hosts a:2,b:2");
  ExpectUsageError(RunLockstep({"bench-comm", "--hosts", "a:2,a:2"}), "host 'a' is listed twice");
  ExpectUsageError(RunLockstep({"bench-comm", "--hosts", "no-such-host.invalid:2"}),
                   "host 'no-such-host.invalid' does not resolve here");
}

// --inject-fault specs are checked before anything runs: malformed, unknown kind, a rank
// outside the world, a step outside the run.
TEST(CliErrors, BadFaultSpecs) {
  auto run = [](const std::string& spec) {
    return RunLockstep({"train", "--config", "configs/gpt-tiny.toml", "--steps", "5", "--inject-fault", spec});
  };
  ExpectUsageError(run("kill"), "--inject-fault 'kill'");
  ExpectUsageError(run("explode:rank=0:step=1"), "unknown fault");
  ExpectUsageError(run("kill:rank=1:step=2"), "rank 1 is not in a world of 1");
  ExpectUsageError(run("kill:rank=0:step=6"), "step 6 is not in this run's 1..5");
  ExpectUsageError(run("kill:rank=0:step=0"), "step 0");
  ExpectUsageError(run("hang:rank=0:during=checkpoint"), "during=checkpoint is a kill");
  ExpectUsageError(run("kill:rank=x:step=1"), "bad rank");
}

// --layout: the product of the factors must be the world size, and the error names them.
TEST(CliErrors, BadLayouts) {
  auto run = [](std::vector<std::string> extra) {
    std::vector<std::string> a = {"train", "--config", "configs/gpt-tiny.toml", "--steps", "1"};
    a.insert(a.end(), extra.begin(), extra.end());
    return RunLockstep(a);
  };
  ExpectUsageError(run({"--nproc", "4", "--layout", "dp=2,tp=2,pp=2"}),
                   "dp × tp × pp = 2 × 2 × 2 = 8 workers, but the world has 4");
  ExpectUsageError(run({"--nproc", "2", "--layout", "dp=2,ep=2"}), "unknown factor 'ep'");
  ExpectUsageError(run({"--nproc", "8", "--layout", "tp=8"}),
                   "model.heads = 4 is not divisible by the tensor-parallel degree tp = 8");
  ExpectUsageError(run({"--nproc", "8", "--layout", "pp=8"}),
                   "--layout pp=8: the model has 4 layers; each pipeline stage needs at least one (use pp <= 4)");
  ExpectUsageError(run({"--nproc", "2", "--layout", "pp=2", "--set", "train.pp_microbatches=3"}),
                   "train.pp_microbatches = 3 does not divide the per-replica batch 16");
  ExpectUsageError(run({"--nproc", "2", "--layout", "pp=2", "--set", "train.accum_steps=2"}),
                   "with pipeline parallelism gradients accumulate over train.pp_microbatches");
  ExpectUsageError(run({"--nproc", "2", "--layout", "tp=2", "--deterministic", "--set", "train.det_tp_slices=1"}),
                   "--deterministic with tp=2 needs train.det_tp_slices divisible by 2, got 1");
  ExpectUsageError(RunLockstep({"train", "--config", "configs/cnn-fashion.toml", "--steps", "1", "--nproc", "2",
                                "--layout", "tp=2"}),
                   "tensor and pipeline parallelism need model.kind = \"gpt\"");
}

}  // namespace
}  // namespace lockstep::testing
