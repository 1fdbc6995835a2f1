// From text to a trained model and back, end to end with the real binary: `tokenizer train`,
// `tokenizer encode/decode`, `tokens --tokenizer` (text files and JSON lines), training a Llama
// on the tokens with data.tokenizer, `sample --prompt` and `export --format hf`; and the bad
// input of each, one line and exit status 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli_test_util.h"
#include "lockstep/data/token_file.h"
#include "test_env.h"

namespace lockstep::testing {
namespace {

constexpr const char* kFortunes = "/usr/share/games/fortunes";

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void Spit(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::vector<int32_t> Ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::istringstream in(text);
  int32_t id;
  while (in >> id) ids.push_back(id);
  return ids;
}

std::vector<int32_t> TokenFileIds(const std::string& path) {
  auto f = data::TokenFile::Open(path, data::TokenFormat::kAuto);
  EXPECT_TRUE(f.ok()) << f.status().message();
  std::vector<int32_t> ids(static_cast<size_t>(f->size()));
  f->Copy(0, f->size(), ids.data());
  return ids;
}

// The last line of stderr, which a one-line error is.
std::string Err(const CommandResult& r) {
  std::string e = r.err;
  while (!e.empty() && e.back() == '\n') e.pop_back();
  return e.substr(e.rfind('\n') == std::string::npos ? 0 : e.rfind('\n') + 1);
}

TEST(TokenizerCli, TextToTokenizerToTokensToLlamaToSampleAndExport) {
  if (!std::filesystem::exists(kFortunes)) LOCKSTEP_SKIP_OUTSIDE_CI("the fortunes corpus is missing (Debian fortunes)");
  const std::string dir = MakeTempDir("tokenizer_cli");
  const std::string tok = dir + "/bpe/tokenizer.json";  // the folder does not exist yet
  CommandResult trained = RunLockstep({"tokenizer", "train", "--from-text", kFortunes, "--vocab-size", "512",
                                       "--pre-tokenizer", "llama3", "--special", "<|endoftext|>", "--out", tok});
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  EXPECT_NE(trained.out.find("vocabulary 512 (1 special, 256 bytes, 255 merges), pre-tokenizer llama3"),
            std::string::npos)
      << trained.out;

  // encode then decode gives the text back, byte for byte; the ids are below the vocabulary.
  const std::string text_file = std::string(kFortunes) + "/fortunes";
  CommandResult enc = RunLockstep({"tokenizer", "encode", "--tokenizer", tok, text_file});
  ASSERT_EQ(enc.exit_code, 0) << enc.err;
  const std::vector<int32_t> ids = Ids(enc.out);
  ASSERT_GT(ids.size(), 1000u);
  EXPECT_LT(ids.size(), Slurp(text_file).size() / 2) << "the merges shorten the text";
  for (int32_t id : ids) ASSERT_TRUE(id >= 1 && id < 512) << id;  // 0 is <|endoftext|>, not in the text
  Spit(dir + "/ids.txt", enc.out);
  CommandResult dec = RunLockstep({"tokenizer", "decode", "--tokenizer", tok, dir + "/ids.txt"});
  ASSERT_EQ(dec.exit_code, 0) << dec.err;
  EXPECT_EQ(dec.out, Slurp(text_file));

  // A token file of one document is that document's ids and the end-of-text token.
  CommandResult one = RunLockstep({"tokens", "--tokenizer", tok, "--from-text", text_file, "--out", dir + "/one.bin"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  std::vector<int32_t> expect = ids;
  expect.push_back(0);
  EXPECT_EQ(TokenFileIds(dir + "/one.bin"), expect);
  // JSON lines: each line's text a document, in order.
  Spit(dir + "/docs.jsonl", "{\"text\": \"The cat sat.\", \"id\": 1}\n\n{\"text\": \"Ünïcode 🦙\"}\n");
  CommandResult jl = RunLockstep({"tokens", "--tokenizer", tok, "--from-jsonl", dir + "/docs.jsonl", "--text-key", "text",
                                  "--out", dir + "/docs.bin"});
  ASSERT_EQ(jl.exit_code, 0) << jl.err;
  Spit(dir + "/a.txt", "The cat sat.");
  Spit(dir + "/b.txt", "Ünïcode 🦙");
  expect = Ids(RunLockstep({"tokenizer", "encode", "--tokenizer", tok, dir + "/a.txt"}).out);
  expect.push_back(0);
  for (int32_t id : Ids(RunLockstep({"tokenizer", "encode", "--tokenizer", tok, dir + "/b.txt"}).out)) expect.push_back(id);
  expect.push_back(0);
  EXPECT_EQ(TokenFileIds(dir + "/docs.bin"), expect);

  // The whole corpus, trained on by a small Llama that remembers its tokenizer.
  CommandResult all = RunLockstep({"tokens", "--tokenizer", tok, "--from-text", kFortunes, "--out", dir + "/all.bin"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  CommandResult run = RunLockstep({"train", "--config", std::string(LOCKSTEP_SOURCE_DIR) + "/configs/llama-bpe.toml",
                                   "--steps", "6", "--set", "model.vocab=512", "--set", "model.layers=2", "--set",
                                   "model.context=32", "--set", "train.batch_size=4", "--set", "data.train=" + dir + "/all.bin",
                                   "--set", "data.tokenizer=" + tok, "--set", "eval.batches=2", "--out", dir + "/run"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  CommandResult s = RunLockstep({"sample", "--checkpoint", dir + "/run", "--prompt", "The cat", "--tokens", "8"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(s.out.rfind("The cat", 0), 0u) << "text out, the prompt first: " << s.out;
  CommandResult longer = RunLockstep({"sample", "--checkpoint", dir + "/run", "--prompt", std::string(400, 'x')});
  EXPECT_EQ(longer.exit_code, 2);
  EXPECT_NE(Err(longer).find("tokens, longer than the context of 32"), std::string::npos) << longer.err;
  CommandResult exp = RunLockstep({"export", dir + "/run", "--format", "hf", "--out", dir + "/hf"});
  ASSERT_EQ(exp.exit_code, 0) << exp.err;
  // The exported tokenizer.json is the one trained, and reads back with the same ids.
  EXPECT_EQ(nlohmann::json::parse(Slurp(dir + "/hf/tokenizer.json")), nlohmann::json::parse(Slurp(tok)));
  EXPECT_EQ(nlohmann::json::parse(Slurp(dir + "/hf/tokenizer_config.json"))["eos_token"], "<|endoftext|>");
  EXPECT_EQ(Ids(RunLockstep({"tokenizer", "encode", "--tokenizer", dir + "/hf/tokenizer.json", text_file}).out), ids);
  std::filesystem::remove_all(dir);
}

TEST(TokenizerCli, BadInputIsOneLineAndExitTwo) {
  const std::string dir = MakeTempDir("tokenizer_bad");
  const std::string gpt2 = std::string(LOCKSTEP_SOURCE_DIR) + "/tests/text/data/gpt2.tokenizer.json";
  auto expect_error = [](const std::vector<std::string>& args, const std::string& message) {
    CommandResult r = RunLockstep(args);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_EQ(Err(r), "lockstep: error: " + message);
  };
  // Another model type, named.
  nlohmann::json wp = nlohmann::json::parse(Slurp(gpt2));
  wp["model"]["type"] = "WordPiece";
  Spit(dir + "/wp.json", wp.dump());
  Spit(dir + "/t.txt", "hello");
  expect_error({"tokenizer", "encode", "--tokenizer", dir + "/wp.json", dir + "/t.txt"},
               "tokenizer " + dir + "/wp.json: model type WordPiece is not supported (lockstep reads byte-level BPE tokenizers)");
  wp["model"]["type"] = "Unigram";
  Spit(dir + "/uni.json", wp.dump());
  expect_error({"tokens", "--tokenizer", dir + "/uni.json", "--from-text", dir + "/t.txt", "--out", dir + "/x.bin"},
               "tokenizer " + dir + "/uni.json: model type Unigram is not supported (lockstep reads byte-level BPE tokenizers)");
  // A token id past the vocabulary.
  Spit(dir + "/ids.txt", "15496 50257\n");
  expect_error({"tokenizer", "decode", "--tokenizer", gpt2, dir + "/ids.txt"},
               dir + "/ids.txt: token id 50257 is not below the vocabulary size 50257");
  // Invalid UTF-8 where text is required, named by its byte offset.
  Spit(dir + "/bad.txt", std::string("line one\nab\xFF"));
  expect_error({"tokenizer", "encode", "--tokenizer", gpt2, dir + "/bad.txt"},
               dir + "/bad.txt: the text is not valid UTF-8 at byte offset 11");
  expect_error({"tokenizer", "train", "--from-text", dir + "/bad.txt", "--vocab-size", "300", "--out", dir + "/t.json"},
               dir + "/bad.txt is not valid UTF-8 at byte offset 11");
  // A JSON line without the key, named by its line; nothing is left behind.
  Spit(dir + "/d.jsonl", "{\"text\": \"a\"}\n{\"body\": \"b\"}\n");
  expect_error({"tokens", "--tokenizer", gpt2, "--from-jsonl", dir + "/d.jsonl", "--text-key", "text", "--out",
                dir + "/d.bin"},
               dir + "/d.jsonl line 2: no key \"text\"");
  EXPECT_FALSE(std::filesystem::exists(dir + "/d.bin"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/d.bin.tmp"));
  Spit(dir + "/n.jsonl", "{\"text\": 3}\nnot json\n");
  expect_error({"tokens", "--tokenizer", gpt2, "--from-jsonl", dir + "/n.jsonl", "--text-key", "text", "--out", dir + "/n.bin"},
               dir + "/n.jsonl line 1: \"text\" is not a string");
  // A vocabulary too small for the bytes; a tokenizer larger than the model's vocabulary.
  expect_error({"tokenizer", "train", "--from-text", dir + "/t.txt", "--vocab-size", "200", "--out", dir + "/t.json"},
               "--vocab-size 200 is below the 256 tokens every byte-level BPE vocabulary starts with (0 special + 256 bytes)");
  Spit(dir + "/tok.bin", "");
  std::vector<std::string> flags = TinyGptFlags();
  std::vector<std::string> args = {"train"};
  args.insert(args.end(), flags.begin(), flags.end());
  for (const std::string& a : {std::string("--steps"), std::string("1"), std::string("--set"), std::string("data.kind=tokens"),
                               std::string("--set"), "data.train=" + dir + "/tok.bin", std::string("--set"),
                               "data.tokenizer=" + gpt2, std::string("--out"), dir + "/run"})
    args.push_back(a);
  expect_error(args, "data.tokenizer " + gpt2 + " has 50257 ids, more than model.vocab = 256");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lockstep::testing

namespace lockstep::testing {
namespace {

struct Val {
  double loss = 0;
  int64_t tokens = 0;
};

// One training step at lr 1e-30 (the weights do not move in fp32) on `bin`, validated on the
// whole held-out split: the validation loss of the same weights under the file's mask.
Val ValidateUnder(const std::string& dir, const std::string& bin, const std::string& name) {
  CommandResult r = RunLockstep({"train", "--config", std::string(LOCKSTEP_SOURCE_DIR) + "/configs/llama-bpe.toml",
                                 "--steps", "1", "--deterministic", "--set", "model.vocab=300", "--set", "model.layers=1",
                                 "--set", "model.context=32", "--set", "train.batch_size=8", "--set", "data.train=" + bin,
                                 "--set", "data.tokenizer=", "--set", "data.loss_mask=true", "--set", "optim.lr=1e-30",
                                 "--set", "optim.min_lr=0", "--set", "eval.batches=0", "--set", "eval.every=1", "--out",
                                 dir + "/" + name});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  Val v;
  for (const std::string& line : ReadLines(dir + "/" + name + "/metrics.jsonl")) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("val_loss")) v = {j["val_loss"].get<double>(), j["val_tokens"].get<int64_t>()};
  }
  return v;
}

void WriteWithMask(const std::string& path, const std::vector<int32_t>& ids, const std::vector<int32_t>& mask) {
  auto t = data::LlmcTokenWriter::Create(path, false);
  auto m = data::LlmcTokenWriter::CreateLossMask(path + ".mask");
  ASSERT_TRUE(t.ok() && m.ok());
  ASSERT_TRUE(t->Append(ids).ok() && m->Append(mask).ok());
  ASSERT_TRUE(m->Finish().ok() && t->Finish().ok());
}

// Instruction pairs: the mask keeps the response's tokens and the end-of-text, and the loss on
// them alone differs from the loss on everything by exactly the prompt tokens' share.
TEST(TokenizerCli, InstructionPairsTrainOnTheResponseTokensOnly) {
  const std::string dir = MakeTempDir("tokenizer_pairs");
  std::string jsonl, text;
  for (int i = 0; i < 400; ++i) {
    const std::string q = "What is " + std::to_string(i % 37) + " plus " + std::to_string(i % 11) + "?\n";
    const std::string a = std::to_string(i % 37 + i % 11) + (i % 2 ? " exactly." : ".");
    jsonl += nlohmann::json({{"q", q}, {"a", a}}).dump() + "\n";
    text += q + a + "\n";
  }
  Spit(dir + "/pairs.jsonl", jsonl);
  Spit(dir + "/pairs.txt", text);
  const std::string tok = dir + "/tok.json";
  ASSERT_EQ(RunLockstep({"tokenizer", "train", "--from-text", dir + "/pairs.txt", "--vocab-size", "300", "--special",
                         "<|endoftext|>", "--out", tok})
                .exit_code,
            0);
  CommandResult w = RunLockstep({"tokens", "--tokenizer", tok, "--from-jsonl", dir + "/pairs.jsonl", "--prompt-key", "q",
                                 "--response-key", "a", "--out", dir + "/pairs.bin"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_NE(w.out.find("train with data.loss_mask = true"), std::string::npos) << w.out;
  const std::vector<int32_t> ids = TokenFileIds(dir + "/pairs.bin");
  const std::vector<int32_t> mask = TokenFileIds(dir + "/pairs.bin.mask");
  ASSERT_EQ(ids.size(), mask.size());
  // The first document: the prompt's ids under 0s, the response's and the end-of-text under 1s.
  Spit(dir + "/q0.txt", "What is 0 plus 0?\n");
  Spit(dir + "/a0.txt", "0.");
  const std::vector<int32_t> q0 = Ids(RunLockstep({"tokenizer", "encode", "--tokenizer", tok, dir + "/q0.txt"}).out);
  const std::vector<int32_t> a0 = Ids(RunLockstep({"tokenizer", "encode", "--tokenizer", tok, dir + "/a0.txt"}).out);
  std::vector<int32_t> doc = q0, doc_mask(q0.size(), 0);
  doc.insert(doc.end(), a0.begin(), a0.end());
  doc.push_back(0);
  doc_mask.resize(doc.size(), 1);
  ASSERT_GE(ids.size(), doc.size());
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(doc.size())), doc);
  EXPECT_EQ(std::vector<int32_t>(mask.begin(), mask.begin() + static_cast<std::ptrdiff_t>(doc.size())), doc_mask);

  // The same tokens under every target, and under the prompts' targets alone.
  std::vector<int32_t> ones(ids.size(), 1), prompts(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) prompts[i] = 1 - mask[i];
  WriteWithMask(dir + "/all.bin", ids, ones);
  WriteWithMask(dir + "/prompts.bin", ids, prompts);
  const Val response = ValidateUnder(dir, dir + "/pairs.bin", "response");
  const Val all = ValidateUnder(dir, dir + "/all.bin", "all");
  const Val prompt = ValidateUnder(dir, dir + "/prompts.bin", "prompt");
  ASSERT_GT(response.tokens, 0);
  ASSERT_GT(prompt.tokens, 0);
  EXPECT_EQ(response.tokens + prompt.tokens, all.tokens);
  EXPECT_LT(response.tokens, all.tokens / 2) << "responses are the shorter part";
  // loss(all) = share(response) * loss(response) + share(prompt) * loss(prompt)
  const double mixed = (response.loss * static_cast<double>(response.tokens) + prompt.loss * static_cast<double>(prompt.tokens)) /
                       static_cast<double>(all.tokens);
  EXPECT_NEAR(all.loss, mixed, 1e-5 * all.loss);
  EXPECT_GT(std::abs(response.loss - all.loss), 1e-3) << "the mask changed what was counted";
  // Training rows say how many targets each step trained on.
  bool reported = false;
  for (const std::string& line : ReadLines(dir + "/response/metrics.jsonl")) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("trained_tokens")) {
      EXPECT_GT(j["trained_tokens"].get<int64_t>(), 0);
      EXPECT_LT(j["trained_tokens"].get<int64_t>(), 8 * 32);
      reported = true;
    }
  }
  EXPECT_TRUE(reported);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lockstep::testing
