// The BPE trainer: merges computed by hand on small texts, its tokenizer.json read back by the
// reader, and the same result whatever the number of threads.
#include "lockstep/text/bpe_trainer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <fstream>
#include <random>
#include <sstream>

#include "lockstep/text/tokenizer.h"
#include "test_env.h"

namespace lockstep::text {
namespace {

using nlohmann::json;

TrainedBpe TrainOn(const std::string& text, int32_t vocab, PreTokenizerKind kind = PreTokenizerKind::kGpt2,
                   std::vector<std::string> special = {}, int threads = 1) {
  BpeTrainerOptions o;
  o.vocab_size = vocab;
  o.pre_tokenizer = kind;
  o.special_tokens = std::move(special);
  o.threads = threads;
  BpeTrainer trainer(o);
  EXPECT_TRUE(trainer.AddText(text, "text").ok());
  auto r = trainer.Train();
  EXPECT_TRUE(r.ok()) << r.status().message();
  return *std::move(r);
}

TEST(BpeTrainer, MostFrequentPairFirst) {
  // Words "ab" x1, "Ġab" x2, "Ġabc" x1: (a,b) is seen 4 times, (Ġ,a) 3, (b,c) 1; after a+b,
  // (Ġ,ab) 3 and (ab,c) 1; after Ġ+ab, (Ġab,c) 1.
  const TrainedBpe t = TrainOn("ab ab ab abc", 256 + 3);
  EXPECT_EQ(t.tokenizer["model"]["merges"], json::array({"a b", "Ġ ab", "Ġab c"}));
  EXPECT_EQ(t.tokens, 4);  // ab, Ġab, Ġab, Ġabc
  EXPECT_EQ(t.tokenizer["model"]["vocab"]["Ġabc"], 258);
  // The first 256 ids are the byte characters in code point order: '!' first, 'Ġ' (U+0120)
  // after 'ÿ' (U+00FF).
  EXPECT_EQ(t.tokenizer["model"]["vocab"]["!"], 0);
  EXPECT_EQ(t.tokenizer["model"]["vocab"]["Ā"], 188);
}

TEST(BpeTrainer, TiesGoToThePairOfSmallerIds) {
  // (a,b), (Ġ,c), (c,d) are each seen once; 'a' < 'c' < 'Ġ' in id order.
  const TrainedBpe t = TrainOn("ab cd", 256 + 3);
  EXPECT_EQ(t.tokenizer["model"]["merges"], json::array({"a b", "c d", "Ġ cd"}));
}

TEST(BpeTrainer, SpecialTokensComeFirstAndAreAddedTokens) {
  const TrainedBpe t = TrainOn("hello hello", 300, PreTokenizerKind::kGpt2, {"<|endoftext|>", "<pad>"});
  EXPECT_EQ(t.tokenizer["model"]["vocab"]["<|endoftext|>"], 0);
  EXPECT_EQ(t.tokenizer["model"]["vocab"]["<pad>"], 1);
  EXPECT_EQ(t.tokenizer["model"]["vocab"]["!"], 2);
  auto tok = Tokenizer::FromJson(t.tokenizer, "trained");
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  EXPECT_EQ(tok->end_of_text(), 0);
  EXPECT_EQ(*tok->Encode("hello<|endoftext|>"), (std::vector<int32_t>{*tok->TokenToId("hello"), 0}));
}

TEST(BpeTrainer, VocabularyBelowTheBytesIsOneLine) {
  BpeTrainerOptions o;
  o.vocab_size = 257;
  o.special_tokens = {"<s>", "</s>"};
  EXPECT_EQ(BpeTrainer(o).Train().status().message(),
            "--vocab-size 257 is below the 258 tokens every byte-level BPE vocabulary starts with (2 special + 256 bytes)");
  BpeTrainer t(o);
  EXPECT_EQ(t.AddText(std::string("ab\xFF"), "notes.txt").message(), "notes.txt is not valid UTF-8 at byte offset 2");
}

// Text with what pre-tokenizers cut at: contractions, runs of spaces and newlines, digits,
// punctuation, non-Latin letters and emoji.
std::string MixedText(size_t words, uint32_t seed) {
  const std::vector<std::string> vocab = {"the", "cat", "sat", "on", "mat", "don't", "I'll", "12345", "7", "über",
                                          "Привет", "日本語", "🦙", "x+y", "==", "  ", "\n", "\n\n", "\t", "fish."};
  std::mt19937 rng(seed);
  std::string text;
  for (size_t i = 0; i < words; ++i) {
    text += vocab[rng() % vocab.size()];
    text += rng() % 5 == 0 ? "" : " ";
  }
  return text;
}

TEST(BpeTrainer, ItsTokenizerReadBackGivesTheTrainersTokens) {
  const std::string text = MixedText(20000, 7);
  for (PreTokenizerKind kind : {PreTokenizerKind::kGpt2, PreTokenizerKind::kLlama3}) {
    const TrainedBpe t = TrainOn(text, 400, kind);
    EXPECT_EQ(t.merges, 400 - 256);
    // Through the file format: dumped, parsed, read.
    auto tok = Tokenizer::FromJson(json::parse(t.tokenizer.dump()), "trained");
    ASSERT_TRUE(tok.ok()) << tok.status().message();
    // The trainer reads text line by line (each line with its '\n', as tokenizers' trainer
    // does): encoded line by line, the text has exactly its number of tokens.
    int64_t by_line = 0;
    for (size_t at = 0; at < text.size();) {
      const size_t nl = text.find('\n', at);
      const size_t end = nl == std::string::npos ? text.size() : nl + 1;
      by_line += static_cast<int64_t>(tok->Encode(text.substr(at, end - at))->size());
      at = end;
    }
    EXPECT_EQ(by_line, t.tokens);
    const std::vector<int32_t> ids = *tok->Encode(text);
    EXPECT_EQ(*tok->Decode(ids), text);
    EXPECT_LT(ids.size(), text.size() / 2);  // it did learn something
  }
}

// Against tokenizers 0.23.2's own training on the fortunes file (tests/text/data/node/train.js):
// the same 743 merges in the same order, the same vocabulary.
TEST(BpeTrainer, MergesAsHuggingFacesTrainerOnFortunes) {
  const std::string path = "/usr/share/games/fortunes/fortunes";
  std::ifstream in(path, std::ios::binary);
  if (!in) LOCKSTEP_SKIP_OUTSIDE_CI(path + " is missing (Debian package fortunes-min)");
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  ASSERT_EQ(text.size(), 24516u) << path << " is not the file the reference was trained on (fortunes-min 1:1.99.1)";
  for (auto [kind, name] : {std::pair{PreTokenizerKind::kGpt2, "gpt2"}, std::pair{PreTokenizerKind::kLlama3, "llama3"}}) {
    const TrainedBpe mine = TrainOn(text, 1000, kind, {"<|endoftext|>"}, 2);
    std::ifstream ref_in(std::string(LOCKSTEP_SOURCE_DIR) + "/tests/text/data/fortunes-" + name + ".tokenizer.json");
    const json ref = json::parse(ref_in);
    json ref_merges = json::array();
    for (const json& m : ref["model"]["merges"]) ref_merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    EXPECT_EQ(mine.tokenizer["model"]["merges"], ref_merges) << name;
    EXPECT_EQ(mine.tokenizer["model"]["vocab"], ref["model"]["vocab"]) << name;
  }
}

TEST(BpeTrainer, ThreadsChangeNothing) {
  // Several MiB, so that it is cut into slices for the threads.
  const std::string text = MixedText(600000, 11);
  ASSERT_GT(text.size(), 2u << 20);
  const TrainedBpe one = TrainOn(text, 300, PreTokenizerKind::kLlama3, {}, 1);
  const TrainedBpe two = TrainOn(text, 300, PreTokenizerKind::kLlama3, {}, 2);
  EXPECT_EQ(one.tokenizer.dump(), two.tokenizer.dump());
  EXPECT_EQ(one.tokens, two.tokens);
}

}  // namespace
}  // namespace lockstep::text
