// export / train --init-from / sample end to end on a tied byte-level GPT trained on a token
// file: the Hugging Face, llm.c and lockstep forms of one checkpoint start runs (in any
// layout) that end with the same weights; sample reproduces under a seed; bad input exits 2.
#include <gtest/gtest.h>

#include <algorithm>

#include "cli_test_util.h"

namespace lockstep::testing {
namespace {

std::vector<std::string> Tiny(const std::string& out, const std::string& tokens, std::vector<std::string> extra) {
  std::vector<std::string> a = TinyGptFlags();
  a.insert(a.begin(), "train");
  for (const std::string& s :
       {std::string("--set"), std::string("model.layers=2"), std::string("--set"),
        std::string("model.tie_embeddings=true"), std::string("--set"), std::string("data.kind=tokens"),
        std::string("--set"), "data.train=" + tokens, std::string("--out"), out})
    a.push_back(s);
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(InteropCli, ExportedFormsStartTheSameRunAndSampleReproduces) {
  const std::string dir = MakeTempDir("interop");
  const std::string bin = dir + "/fortunes.bin";
  ASSERT_EQ(RunLockstep({"tokens", "--from-text", "/usr/share/games/fortunes", "--out", bin}).exit_code, 0);
  CommandResult base = RunLockstep(Tiny(dir + "/base", bin, {"--steps", "3"}));
  ASSERT_EQ(base.exit_code, 0) << base.err;
  CommandResult hf = RunLockstep({"export", dir + "/base", "--format", "hf", "--out", dir + "/hf"});
  ASSERT_EQ(hf.exit_code, 0) << hf.err;
  CommandResult llmc = RunLockstep({"export", dir + "/base/checkpoints", "--format", "llmc", "--out", dir + "/m.bin"});
  ASSERT_EQ(llmc.exit_code, 0) << llmc.err;

  std::vector<std::string> hashes;
  const std::vector<std::vector<std::string>> starts = {
      {"--init-from", "lockstep:" + dir + "/base"},
      {"--init-from", "hf:" + dir + "/hf", "--nproc", "2", "--layout", "pp=2"},
      {"--init-from", "llmc:" + dir + "/m.bin", "--nproc", "2", "--layout", "tp=2"},
      // Under the supervisor, killed in its first step (before any checkpoint): the restart
      // starts from the same weights again, not from a fresh model.
      {"--init-from", "lockstep:" + dir + "/base", "--max-restarts", "1", "--inject-fault", "kill:rank=0:step=1"}};
  for (size_t i = 0; i < starts.size(); ++i) {
    std::vector<std::string> extra = {"--steps", "2", "--deterministic"};
    extra.insert(extra.end(), starts[i].begin(), starts[i].end());
    const std::string out = dir + "/start" + std::to_string(i);
    CommandResult r = RunLockstep(Tiny(out, bin, extra));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    hashes.push_back(DoneHash(out));
  }
  EXPECT_EQ(hashes[1], hashes[0]) << "hf";
  EXPECT_EQ(hashes[2], hashes[0]) << "llmc";
  EXPECT_EQ(hashes[3], hashes[0]) << "supervised, restarted";
  // Not the fresh model's: the runs did start from the checkpoint.
  CommandResult fresh = RunLockstep(Tiny(dir + "/fresh", bin, {"--steps", "2", "--deterministic"}));
  ASSERT_EQ(fresh.exit_code, 0) << fresh.err;
  EXPECT_NE(DoneHash(dir + "/fresh"), hashes[0]);

  CommandResult s1 = RunLockstep(
      {"sample", "--checkpoint", dir + "/base", "--prompt", "The ", "--tokens", "30", "--seed", "5", "--top-k", "20"});
  CommandResult s2 = RunLockstep(
      {"sample", "--checkpoint", dir + "/base", "--prompt", "The ", "--tokens", "30", "--seed", "5", "--top-k", "20"});
  ASSERT_EQ(s1.exit_code, 0) << s1.err;
  EXPECT_EQ(s1.out, s2.out);
  EXPECT_EQ(s1.out.rfind("The ", 0), 0u) << s1.out;
  EXPECT_EQ(s1.out.size(), 4u + 30u + 1u);  // prompt, 30 bytes, newline

  struct Bad {
    std::vector<std::string> args;
    std::string expect;
  };
  const std::vector<Bad> bad = {
      {{"sample", "--checkpoint", dir + "/base", "--prompt-tokens", "1,999"}, "is not a token id in [0, 256)"},
      {{"sample", "--checkpoint", dir + "/nothing"}, "nothing"},
      {{"export", dir + "/base", "--format", "onnx", "--out", dir + "/x"}, "--format"},
      {{"train", "--config", "configs/gpt-tiny.toml", "--steps", "1", "--init-from", "hf:" + dir + "/hf", "--out",
        dir + "/untied"},
       "model.context is 32, the config's is 128"},
  };
  for (const Bad& b : bad) {
    CommandResult r = RunLockstep(b.args);
    EXPECT_EQ(r.exit_code, 2) << b.expect << ": " << r.err;
    EXPECT_NE(r.err.find(b.expect), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace lockstep::testing
