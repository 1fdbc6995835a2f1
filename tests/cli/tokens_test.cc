// data.kind = "tokens" end to end: `lockstep tokens --from-text` turns the fortunes corpus into
// an llm.c token file that trains to the very same weights as the text itself; bad token
// files stop the run with one line and exit status 2.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "cli_test_util.h"

namespace lockstep::testing {
namespace {

constexpr const char* kFortunes = "/usr/share/games/fortunes";

std::vector<std::string> Train(const std::string& out, std::vector<std::string> extra) {
  std::vector<std::string> a = TinyGptFlags();
  a.insert(a.begin(), "train");
  for (const char* s : {"--steps", "4", "--deterministic", "--set", "eval.every=2"}) a.push_back(s);
  a.push_back("--out");
  a.push_back(out);
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(Tokens, FromTextTrainsToTheTextRunsWeights) {
  const std::string dir = MakeTempDir("tokens");
  const std::string bin = dir + "/fortunes.bin";
  CommandResult w = RunLockstep({"tokens", "--from-text", kFortunes, "--out", bin});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_NE(w.out.find("(byte-level, vocab 256)"), std::string::npos) << w.out;

  CommandResult text = RunLockstep(Train(dir + "/text", {}));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  // Two workers on the token file: the same windows, the same deterministic weights.
  CommandResult tok =
      RunLockstep(Train(dir + "/tok", {"--nproc", "2", "--set", "data.kind=tokens", "--set", "data.train=" + bin}));
  ASSERT_EQ(tok.exit_code, 0) << tok.err;
  const std::string hash = DoneHash(dir + "/text");
  ASSERT_EQ(hash.size(), 16u);
  EXPECT_EQ(DoneHash(dir + "/tok"), hash);
  // The validation losses agree too (same held-out 10%).
  std::vector<std::string> a = ReadLines(dir + "/text/metrics.jsonl"), b = ReadLines(dir + "/tok/metrics.jsonl");
  std::vector<std::string> va, vb;
  for (const std::string& l : a)
    if (l.find("val_loss") != std::string::npos) va.push_back(l);
  for (const std::string& l : b)
    if (l.find("val_loss") != std::string::npos) vb.push_back(l);
  ASSERT_EQ(va.size(), 2u);
  ASSERT_EQ(vb.size(), 2u);
  // To rounding, not bit for bit: each worker evaluates its half of a batch, and a GEMM of half
  // the rows may round a row's logits differently (oneDNN's AVX2 kernels do); other windows
  // would differ in the second digit.
  for (size_t i = 0; i < va.size(); ++i) {
    const double a = nlohmann::json::parse(va[i])["val_loss"], b = nlohmann::json::parse(vb[i])["val_loss"];
    EXPECT_NEAR(a, b, 1e-6 * a) << va[i] << " vs " << vb[i];
  }

  // Resuming from the step-2 checkpoint continues the same token stream to the same weights.
  const std::vector<std::string> tokens = {"--set", "data.kind=tokens", "--set", "data.train=" + bin};
  std::vector<std::string> first = tokens;
  first.insert(first.end(), {"--set", "checkpoint.every=2"});
  ASSERT_EQ(RunLockstep(Train(dir + "/full", first)).exit_code, 0);
  std::vector<std::string> again = tokens;
  again.insert(again.end(), {"--resume", dir + "/full/checkpoints/step-00000002"});
  CommandResult rest = RunLockstep(Train(dir + "/res", again));
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  ExpectResumedAt(dir + "/res", 2);
  EXPECT_EQ(DoneHash(dir + "/res"), hash);
}

void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

TEST(Tokens, BadTokenFilesAreOneLineAndExitTwo) {
  const std::string dir = MakeTempDir("badtokens");
  // Token 300 with model.vocab = 256.
  std::vector<uint8_t> big(2000, 0);
  big[1000] = 44, big[1001] = 1;
  WriteBytes(dir + "/big.bin", big);
  std::vector<uint8_t> header(1024 + 200, 0);
  const int32_t h[3] = {20240520, 7, 100};
  std::memcpy(header.data(), h, sizeof(h));
  WriteBytes(dir + "/version.bin", header);
  struct Case {
    std::vector<std::string> sets;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {{"data.train=" + dir + "/big.bin"}, "holds token 300 at position 500, not below model.vocab = 256"},
      {{"data.train=" + dir + "/version.bin"}, "has llm.c version 7, expected 1"},
      {{"data.train=" + dir + "/none-*.bin"}, "data.train: no token file matches"},
      {{}, "data.train: required with data.kind = \"tokens\""},
      {{"data.train=" + dir + "/big.bin", "data.format=nanogpt"}, "data.format: expected"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> extra = {"--set", "data.kind=tokens"};
    for (const std::string& s : c.sets) extra.insert(extra.end(), {"--set", s});
    CommandResult r = RunLockstep(Train(dir + "/run", extra));
    EXPECT_EQ(r.exit_code, 2) << c.expect << ": " << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  CommandResult missing = RunLockstep({"tokens", "--from-text", dir + "/nothing", "--out", dir + "/x.bin"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("does not exist"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace lockstep::testing
