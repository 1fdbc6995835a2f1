// Mixed precision end to end (train.precision = bf16): --deterministic keeps its
// promise in bf16 (the same weights whatever the world size and layout, with bf16 gradients
// too), bf16 really changes the arithmetic, the memory row counts the bf16 weight copy, and
// bad values exit 2 with one line.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace lockstep::testing {
namespace {

struct TrainedRun {
  std::string hash;
  nlohmann::json memory;
  std::string ran;  // WhatRan
};

TrainedRun Train(const std::string& prefix, std::vector<std::string> extra) {
  const std::string dir = MakeTempDir(prefix);
  std::vector<std::string> args = TinyGptFlags();
  args.insert(args.begin(), "train");
  for (auto& e : std::vector<std::string>{"--steps", "4", "--out", dir, "--set", "model.layers=2"}) args.push_back(e);
  args.insert(args.end(), extra.begin(), extra.end());
  CommandResult r = RunLockstep(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  TrainedRun run{DoneHash(dir), {}, WhatRan(dir)};
  for (const std::string& l : ReadLines(dir + "/metrics.jsonl")) {
    auto j = nlohmann::json::parse(l);
    if (j.value("event", "") == "memory") run.memory = j;
  }
  return run;
}

const std::vector<std::string> kBf16 = {"--deterministic", "--set", "train.precision=bf16", "--set",
                                        "train.grad_dtype=bf16"};

std::vector<std::string> With(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

// One worker reads the per-step bf16 weight copy; ZeRO-3 (no flat parameter buffer) rounds
// each gathered layer per product; tensor and pipeline parallel round slices of the copy; all
// must give the same bits, because rounding is elementwise and happens before any sum.
TEST(Bf16, DeterministicHashIndependentOfWorldSizeAndLayout) {
  const TrainedRun one = Train("bf16-one", With(kBf16, {"--nproc", "1"}));
  ASSERT_FALSE(one.hash.empty());
  const struct {
    std::vector<std::string> flags;
    const char* ran;
  } cases[] = {{{"--nproc", "2"}, "dp=2,tp=1,pp=1 zero=0 world=2 threads"},
               {{"--nproc", "4"}, "dp=4,tp=1,pp=1 zero=0 world=4 threads"},
               {{"--nproc", "2", "--zero", "3"}, "dp=2,tp=1,pp=1 zero=3 world=2 threads"},
               {{"--nproc", "4", "--layout", "tp=2,dp=2"}, "dp=2,tp=2,pp=1 zero=0 world=4 threads"},
               {{"--nproc", "4", "--layout", "pp=2,dp=2"}, "dp=2,tp=1,pp=2 zero=0 world=4 threads 1f1b"}};
  for (const auto& c : cases) {
    const TrainedRun run = Train("bf16-layout", With(kBf16, c.flags));
    EXPECT_EQ(run.hash, one.hash) << c.ran;
    EXPECT_EQ(run.ran, c.ran);
  }
  // ... and bf16 is really on: fp32 products, or fp32 gradient reduction, end elsewhere.
  const TrainedRun fp32 = Train("bf16-ref", {"--deterministic", "--nproc", "1"});
  EXPECT_NE(fp32.hash, one.hash);
  EXPECT_NE(Train("bf16-g32", {"--deterministic", "--set", "train.precision=bf16"}).hash, one.hash)
      << "train.grad_dtype = bf16 made no difference";
}

// The kernel's own flags for this processor (what oneDNN's avx512_core_bf16 and amx needs).
bool CpuHasBf16DotProducts() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags{std::istream_iterator<std::string>(words), std::istream_iterator<std::string>()};
    const bool avx512_bf16 =
        flags.count("avx512f") && flags.count("avx512bw") && flags.count("avx512vl") && flags.count("avx512_bf16");
    return avx512_bf16 || flags.count("amx_bf16");
  }
  return false;
}

TEST(Bf16, MemoryRowCountsTheWeightCopy) {
  const TrainedRun bf16 = Train("bf16-mem", {"--set", "train.precision=bf16"});
  const TrainedRun fp32 = Train("fp32-mem", {});
  ASSERT_TRUE(bf16.memory.contains("bf16_weights_bytes")) << bf16.memory.dump();
  const int64_t params = bf16.memory["parameters"].get<int64_t>();
  EXPECT_EQ(fp32.memory["bf16_weights_bytes"].get<int64_t>(), 0);
  // 2 bytes a parameter where the processor has bf16 dot products (AVX512_BF16 with AVX-512 F,
  // BW and VL, or AMX-BF16, read from /proc/cpuinfo, not from the code under test); none where
  // products are emulated on fp32 kernels.
  const int64_t copy = bf16.memory["bf16_weights_bytes"].get<int64_t>();
  EXPECT_EQ(copy, CpuHasBf16DotProducts() ? 2 * params : 0) << bf16.memory.dump();
  EXPECT_GE(bf16.memory["peak_bytes"].get<int64_t>(), copy + bf16.memory["params_bytes"].get<int64_t>());
}

TEST(Bf16, BadValuesExitTwoWithOneLine) {
  for (const char* set : {"train.precision=fp16", "train.grad_dtype=int8"}) {
    std::vector<std::string> args = TinyGptFlags();
    args.insert(args.begin(), "train");
    for (auto& e : std::vector<std::string>{"--steps", "1", "--out", MakeTempDir("bf16-bad"), "--set", set})
      args.push_back(e);
    CommandResult r = RunLockstep(args);
    EXPECT_EQ(r.exit_code, 2) << set;
    EXPECT_NE(r.err.find(std::string(set).substr(0, std::string(set).find('='))), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("fp32, bf16"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace lockstep::testing
