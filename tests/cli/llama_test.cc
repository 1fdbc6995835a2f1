// model.kind = "llama" end to end: llama-tiny's shape shrunk trains (its validation loss
// falls), and with --deterministic every layout (data parallel, ZeRO 1-3, tensor and pipeline
// parallel and their mix) ends with the one-worker weights, bit for bit, tied or untied, each
// run showing what ran; a layout the model cannot be split into, and a config it cannot
// represent, are one line and exit 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace lockstep::testing {
namespace {

std::vector<std::string> Llama(const std::string& out, int steps, std::vector<std::string> extra) {
  std::vector<std::string> a = {"train",
                                "--config",
                                "configs/llama-tiny.toml",
                                "--steps",
                                std::to_string(steps),
                                "--out",
                                out,
                                "--set",
                                "model.layers=2",
                                "--set",
                                "model.width=32",
                                "--set",
                                "model.ffn_hidden=96",
                                "--set",
                                "model.context=32",
                                "--set",
                                "train.batch_size=8",
                                "--set",
                                "eval.batches=2",
                                "--set",
                                "optim.warmup_steps=2"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(LlamaCli, TrainsAndItsValidationLossFalls) {
  const std::string dir = MakeTempDir("llama-train");
  CommandResult r = RunLockstep(Llama(dir, 40, {"--set", "eval.every=10"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<double> val;
  for (const std::string& l : ReadLines(dir + "/metrics.jsonl"))
    if (auto j = nlohmann::json::parse(l); j.contains("val_loss")) val.push_back(j["val_loss"].get<double>());
  ASSERT_EQ(val.size(), 4u);
  EXPECT_LT(val.back(), val.front() - 0.3) << "validation loss " << val.front() << " -> " << val.back();
  EXPECT_LT(val.front(), 5.6);  // below log(256) = 5.55 + noise: it learned something at all
  const nlohmann::json start = Events(dir, "start").at(0);
  EXPECT_EQ(start["model"], "llama");
}

TEST(LlamaCli, DeterministicEveryLayoutMatchesOneWorker) {
  const std::string one = MakeTempDir("llama-one");
  ASSERT_EQ(RunLockstep(Llama(one, 6, {"--deterministic"})).exit_code, 0);
  ASSERT_EQ(DoneHash(one).size(), 16u);
  const struct {
    std::vector<std::string> flags;
    const char* ran;
  } cases[] = {{{"--nproc", "2"}, "dp=2,tp=1,pp=1 zero=0 world=2 threads"},
               {{"--nproc", "4", "--zero", "1"}, "dp=4,tp=1,pp=1 zero=1 world=4 threads"},
               {{"--nproc", "2", "--zero", "2"}, "dp=2,tp=1,pp=1 zero=2 world=2 threads"},
               {{"--nproc", "4", "--zero", "3"}, "dp=4,tp=1,pp=1 zero=3 world=4 threads"},
               {{"--nproc", "2", "--layout", "tp=2"}, "dp=1,tp=2,pp=1 zero=0 world=2 threads"},
               {{"--nproc", "4", "--layout", "tp=2,pp=2", "--zero", "1"}, "dp=1,tp=2,pp=2 zero=1 world=4 threads 1f1b"},
               {{"--nproc", "4", "--layout", "dp=2,tp=2", "--zero", "3"}, "dp=2,tp=2,pp=1 zero=3 world=4 threads"}};
  for (const auto& c : cases) {
    const std::string dir = MakeTempDir("llama-layout");
    std::vector<std::string> flags = c.flags;
    flags.push_back("--deterministic");
    CommandResult r = RunLockstep(Llama(dir, 6, flags));
    ASSERT_EQ(r.exit_code, 0) << c.ran << "\n" << r.err;
    EXPECT_EQ(DoneHash(dir), DoneHash(one)) << c.ran;
    EXPECT_EQ(WhatRan(dir), c.ran);
  }
}

// Tied: the head reads embed_tokens on one stage, and a pipeline's last stage keeps a copy whose
// gradient is summed with the first stage's.
TEST(LlamaCli, DeterministicTiedPipelineMatchesOneWorker) {
  const std::vector<std::string> tied = {"--deterministic", "--set", "model.tie_embeddings=true"};
  const std::string one = MakeTempDir("llama-tied-one");
  ASSERT_EQ(RunLockstep(Llama(one, 6, tied)).exit_code, 0);
  for (const std::vector<std::string>& layout : std::vector<std::vector<std::string>>{
           {"--nproc", "2", "--layout", "pp=2", "--zero", "2"}, {"--nproc", "4", "--layout", "tp=2,pp=2"}}) {
    const std::string dir = MakeTempDir("llama-tied");
    std::vector<std::string> flags = tied;
    flags.insert(flags.end(), layout.begin(), layout.end());
    CommandResult r = RunLockstep(Llama(dir, 6, flags));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(DoneHash(dir), DoneHash(one)) << WhatRan(dir);
  }
}

// Rank 0's first memory row (after its first step: the step's activations are what its peak
// measured).
nlohmann::json FirstMemoryRow(const std::string& dir) {
  for (const nlohmann::json& j : Events(dir, "memory"))
    if (j.value("rank", -1) == 0) return j;
  ADD_FAILURE() << dir << ": no memory row of rank 0";
  return nlohmann::json::object();
}

// train.recompute = "block": a decoder layer recomputes exactly the arithmetic of its first
// forward, so a deterministic run ends with the weights of the run without it, on one worker,
// under ZeRO-3 and split over tp and pp; and rank 0's measured activation peak drops against
// the same layout without recompute (four layers: two a stage at pp=2).
TEST(LlamaCli, RecomputeEndsWithTheSameWeightsAndHoldsFewerActivations) {
  const std::vector<std::string> base = {"--deterministic", "--set", "model.layers=4"};
  for (const std::vector<std::string>& layout : std::vector<std::vector<std::string>>{
           {}, {"--nproc", "2", "--zero", "3"}, {"--nproc", "4", "--layout", "tp=2,pp=2"}}) {
    std::vector<std::string> flags = base;
    flags.insert(flags.end(), layout.begin(), layout.end());
    const std::string without = MakeTempDir("llama-norecompute");
    CommandResult r = RunLockstep(Llama(without, 4, flags));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    flags.insert(flags.end(), {"--set", "train.recompute=block"});
    const std::string with = MakeTempDir("llama-recompute");
    r = RunLockstep(Llama(with, 4, flags));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(DoneHash(with), DoneHash(without)) << WhatRan(with);
    const int64_t peak = FirstMemoryRow(with)["peak_activation_bytes"].get<int64_t>();
    const int64_t peak_without = FirstMemoryRow(without)["peak_activation_bytes"].get<int64_t>();
    EXPECT_LT(peak, peak_without) << WhatRan(with);
  }
}

TEST(LlamaCli, BadConfigIsOneLine) {
  const struct {
    std::vector<std::string> flags;
    std::string needle;
  } cases[] = {
      {{"--set", "model.kv_heads=3"}, "model.kv_heads"},
      {{"--set", "model.rope_scaling=yarn"}, "\"yarn\" is not implemented"},
      {{"--set", "model.head_dim=3"}, "even head dimension"},
      // 4 heads over 3 tensor-parallel ranks; 2 kv heads over 4 (split, never replicated).
      {{"--nproc", "3", "--layout", "tp=3"}, "model.heads = 4 is not divisible by the tensor-parallel degree tp = 3"},
      {{"--nproc", "4", "--layout", "tp=4"},
       "model.kv_heads = 2 is not divisible by the tensor-parallel degree tp = 4"},
  };
  for (const auto& [flags, needle] : cases) {
    const std::string set = flags.back();
    CommandResult r = RunLockstep(Llama(MakeTempDir("llama-bad"), 1, flags));
    EXPECT_EQ(r.exit_code, 2) << set << "\n" << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    size_t lines = 0;
    for (char ch : r.err) lines += ch == '\n';
    EXPECT_EQ(lines, 1u) << r.err;
  }
}

std::string Bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// lockstep -> HF -> lockstep through the CLI: a trained model's export, imported by a run in
// another layout (tensor and pipeline parallel, ZeRO-1, 4 workers) that takes a step too small to change an fp32 weight
// (lr 1e-30: Adam's update is ~lr, decay lr*wd), exports to the same bytes; the run starts from
// exactly the exported weights (its done hash is the source's).
TEST(LlamaCli, HfRoundTripThroughAnotherLayoutGivesTheSameBytes) {
  const std::string src = MakeTempDir("llama-src"), hf = MakeTempDir("llama-hf"), dst = MakeTempDir("llama-dst"),
                    hf2 = MakeTempDir("llama-hf2");
  ASSERT_EQ(RunLockstep(Llama(src, 3, {})).exit_code, 0);
  CommandResult e = RunLockstep({"export", src, "--format", "hf", "--out", hf});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const nlohmann::json config = nlohmann::json::parse(Bytes(hf + "/config.json"));
  EXPECT_EQ(config["architectures"], nlohmann::json({"LlamaForCausalLM"}));
  EXPECT_EQ(config["num_key_value_heads"], 2);
  CommandResult t = RunLockstep(Llama(dst, 1,
                                      {"--init-from", "hf:" + hf, "--nproc", "4", "--layout", "tp=2,pp=2", "--zero",
                                       "1", "--set", "optim.lr=1e-30", "--set", "optim.min_lr=1e-30"}));
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_EQ(WhatRan(dst), "dp=1,tp=2,pp=2 zero=1 world=4 threads 1f1b");
  EXPECT_EQ(DoneHash(dst), DoneHash(src));
  ASSERT_EQ(RunLockstep({"export", dst, "--format", "hf", "--out", hf2}).exit_code, 0);
  EXPECT_EQ(Bytes(hf2 + "/model.safetensors"), Bytes(hf + "/model.safetensors"));
  // llm.c holds GPT-2s only: one line, exit 2.
  CommandResult llmc = RunLockstep({"export", src, "--format", "llmc", "--out", hf2 + "/model.bin"});
  EXPECT_EQ(llmc.exit_code, 2);
  EXPECT_NE(llmc.err.find("is a Llama"), std::string::npos) << llmc.err;
}

TEST(LlamaCli, AnHfConfigOfAnotherArchitectureIsOneLine) {
  const std::string src = MakeTempDir("llama-src"), hf = MakeTempDir("llama-hf");
  ASSERT_EQ(RunLockstep(Llama(src, 1, {})).exit_code, 0);
  ASSERT_EQ(RunLockstep({"export", src, "--format", "hf", "--out", hf}).exit_code, 0);
  {
    std::ofstream f(hf + "/config.json", std::ios::trunc);
    f << R"({"model_type": "mistral", "architectures": ["MistralForCausalLM"], "sliding_window": 4096})";
  }
  CommandResult r = RunLockstep(Llama(MakeTempDir("llama-dst"), 1, {"--init-from", "hf:" + hf}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("MistralForCausalLM"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// The commands that read a model beside train: sample draws from a Llama checkpoint (the same
// seed, the same text; a byte-level prompt echoed first), plan profiles it (once crashed: it
// fed the Llama a CNN's batch without targets).
TEST(LlamaCli, SamplesAndPlans) {
  const std::string dir = MakeTempDir("llama-sample");
  ASSERT_EQ(RunLockstep(Llama(dir, 2, {})).exit_code, 0);
  CommandResult a = RunLockstep({"sample", "--checkpoint", dir, "--prompt", "ab", "--tokens", "12", "--seed", "7"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out.substr(0, 2), "ab");
  EXPECT_EQ(a.out.size(), 2u + 12u + 1u) << a.out;
  CommandResult b = RunLockstep({"sample", "--checkpoint", dir, "--prompt", "ab", "--tokens", "12", "--seed", "7"});
  EXPECT_EQ(a.out, b.out);
  CommandResult plan = RunLockstep({"plan", "--config", "configs/llama-tiny.toml", "--set", "model.layers=2", "--set",
                                    "model.width=32", "--set", "model.ffn_hidden=96", "--set", "model.context=32",
                                    "--set", "train.batch_size=8", "--nproc", "2", "--out", dir + "/plan"});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_NE(plan.out.find("verdict: train dp=2"), std::string::npos) << plan.out;
}

}  // namespace
}  // namespace lockstep::testing
