// The byte-level BPE tokenizer against Hugging Face's own outputs (tests/text/data/README.md),
// and against expectations written by hand for the paths those vectors miss.
#include "lockstep/text/tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace lockstep::text {
namespace {

using nlohmann::json;

std::string DataPath(const std::string& name) { return std::string(LOCKSTEP_SOURCE_DIR) + "/tests/text/data/" + name; }

json ReadJson(const std::string& name) {
  std::ifstream in(DataPath(name));
  return json::parse(in);
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
  std::string label;
};

std::vector<Case> ReadCases(const std::string& name) {
  std::ifstream in(DataPath(name));
  std::vector<Case> cases;
  std::string line, label;
  while (std::getline(in, line)) {
    if (line.rfind("# ", 0) == 0) {
      label = line;
      continue;
    }
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    Case c;
    c.label = label;
    const std::string hex = line.substr(0, tab);
    if (hex != "-") {
      for (size_t i = 0; i + 1 < hex.size(); i += 2) c.text.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    }
    std::istringstream ids(line.substr(tab + 1));
    int32_t id;
    while (ids >> id) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  return cases;
}

Tokenizer Load(const json& j) {
  auto t = Tokenizer::FromJson(j, "test");
  EXPECT_TRUE(t.ok()) << t.status().message();
  return *std::move(t);
}

void ExpectCases(const Tokenizer& t, const std::vector<Case>& cases, size_t count = 46, bool round_trip = true) {
  ASSERT_EQ(cases.size(), count);
  Tokenizer::Encoder cached(t);
  for (const Case& c : cases) {
    auto ids = t.Encode(c.text);
    ASSERT_TRUE(ids.ok()) << c.label << ": " << ids.status().message();
    EXPECT_EQ(*ids, c.ids) << c.label;
    // The cached encoder (what `lockstep tokens` uses) gives the same ids, twice.
    EXPECT_EQ(*cached.Encode(c.text), c.ids) << c.label;
    EXPECT_EQ(*cached.Encode(c.text), c.ids) << c.label;
    if (!round_trip) continue;
    auto text = t.Decode(c.ids);
    ASSERT_TRUE(text.ok());
    EXPECT_EQ(*text, c.text) << c.label;
  }
}

TEST(Tokenizer, Gpt2GivesHuggingFacesIds) {
  ExpectCases(Load(ReadJson("gpt2.tokenizer.json")), ReadCases("gpt2.cases"));
}

// GPT-NeoX's added tokens (runs of spaces) are split out before the pre-tokenizer.
TEST(Tokenizer, GptNeoxGivesHuggingFacesIdsWithItsAddedSpaceTokens) {
  json j = ReadJson("gpt-neox.tokenizer.json");
  // Its NFC normalizer is refused (lockstep applies no normalizer)...
  auto refused = Tokenizer::FromJson(j, "neox");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "neox: normalizer NFC is not supported (lockstep applies none)");
  // ...but every input of the cases is already in NFC (checked with Python's
  // unicodedata.is_normalized when the file was made), where NFC changes nothing.
  j["normalizer"] = nullptr;
  const Tokenizer t = Load(j);
  ExpectCases(t, ReadCases("gpt-neox.cases"));
  // Without the added tokens the runs of spaces come out differently: the cases do test them.
  json plain = j;
  json kept = json::array();
  for (const json& a : plain["added_tokens"])
    if (a["special"].get<bool>()) kept.push_back(a);
  plain["added_tokens"] = kept;
  const Tokenizer without = Load(plain);
  int differ = 0;
  for (const Case& c : ReadCases("gpt-neox.cases")) differ += *without.Encode(c.text) != c.ids;
  EXPECT_GE(differ, 5);
}

// Tokenizers trained on the fortunes file by tokenizers 0.23.2 itself (data/node/), and its ids
// for 55 inputs: the 46 above, 8 more (contractions in capitals, digit runs, CRLF, Arabic digits,
// non-breaking and ideographic spaces, a special token inside a word) and 20,000 bytes of
// fortunes. The Llama 3 one has ignore_merges on; the Digits one puts a space before every
// piece Digits leaves (ByteLevel's add_prefix_space applies per piece), so it does not round trip.
TEST(Tokenizer, Llama3PatternAndIgnoreMergesGiveHuggingFacesIds) {
  ExpectCases(Load(ReadJson("fortunes-llama3.tokenizer.json")), ReadCases("fortunes-llama3.cases"), 55);
}
TEST(Tokenizer, Gpt2PatternOnATrainedVocabularyGivesHuggingFacesIds) {
  ExpectCases(Load(ReadJson("fortunes-gpt2.tokenizer.json")), ReadCases("fortunes-gpt2.cases"), 55);
}
TEST(Tokenizer, DigitsThenByteLevelWithPrefixSpaceGivesHuggingFacesIds) {
  ExpectCases(Load(ReadJson("fortunes-digits.tokenizer.json")), ReadCases("fortunes-digits.cases"), 55,
              /*round_trip=*/false);
}

TEST(Tokenizer, SpecialTokensSplitOutFirst) {
  const Tokenizer t = Load(ReadJson("gpt2.tokenizer.json"));
  // "Hello" 15496, "<|endoftext|>" 50256, " world" 995
  EXPECT_EQ(*t.Encode("Hello<|endoftext|> world"), (std::vector<int32_t>{15496, 50256, 995}));
  EXPECT_EQ(t.end_of_text(), 50256);
  EXPECT_EQ(*t.Decode(std::vector<int32_t>{15496, 50256, 995}), "Hello<|endoftext|> world");
}

TEST(Tokenizer, InvalidUtf8IsNamedByItsByteOffset) {
  const Tokenizer t = Load(ReadJson("gpt2.tokenizer.json"));
  auto r = t.Encode(std::string("ok \xC3\x28 bad"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "the text is not valid UTF-8 at byte offset 3");
  EXPECT_FALSE(t.Encode(std::string("\xED\xA0\x80")).ok());  // a surrogate
  EXPECT_FALSE(t.Encode(std::string("\xC0\xAF")).ok());      // an overlong '/'
  // Decoding ids whose bytes are not UTF-8 gives U+FFFD, as transformers does: 447 is the
  // token of the lone byte 0xE2 (the start of a three-byte character).
  EXPECT_EQ(*t.Decode(std::vector<int32_t>{447, 11}), "\xEF\xBF\xBD,");
  auto bad = t.Decode(std::vector<int32_t>{50257});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "token id 50257 (position 0) is not in the vocabulary of 50257 ids");
}

// A small byte-level vocabulary: every byte character, then the merges given.
json Tiny(const std::vector<std::string>& merges, json pre_tokenizer = nullptr) {
  json vocab = json::object();
  int id = 0;
  for (int b = 33; b < 127; ++b) vocab[std::string(1, static_cast<char>(b))] = id++;
  vocab["Ġ"] = id++;
  vocab["Ċ"] = id++;
  for (const std::string& m : merges) {
    const size_t sp = m.find(' ');
    vocab[m.substr(0, sp) + m.substr(sp + 1)] = id++;
  }
  if (pre_tokenizer.is_null()) pre_tokenizer = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
          {"pre_tokenizer", pre_tokenizer},
          {"decoder", {{"type", "ByteLevel"}}}};
}

std::vector<std::string> Tokens(const Tokenizer& t, const std::string& text) {
  std::vector<std::string> out;
  const std::vector<int32_t> ids = *t.Encode(text);
  for (int32_t id : ids) out.push_back(t.IdToToken(id));
  return out;
}

TEST(Tokenizer, LowestRankMergesFirstThenLeftmost) {
  // In "aaa", "a a" applies leftmost first: aa + a (then "aa a"); in "aaaa" twice: aa + aa.
  const Tokenizer t = Load(Tiny({"a a", "b c", "aa a", "a bc"}));
  EXPECT_EQ(Tokens(t, "aaa"), (std::vector<std::string>{"aaa"}));
  EXPECT_EQ(Tokens(t, "aaaa"), (std::vector<std::string>{"aa", "aa"}));
  EXPECT_EQ(Tokens(t, "abc"), (std::vector<std::string>{"abc"}));
  // Whichever of (a, b) and (b, c) ranks first wins the shared b.
  EXPECT_EQ(Tokens(Load(Tiny({"b c", "a b"})), "abc"), (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(Tokens(Load(Tiny({"a b", "b c"})), "abc"), (std::vector<std::string>{"ab", "c"}));
}

TEST(Tokenizer, IgnoreMergesKeepsAWholeWordThatIsAToken) {
  // "abc" is in the vocabulary but no merge reaches it from a, b, c in that order.
  json j = Tiny({"a b", "b c"});
  j["model"]["vocab"]["abc"] = 500;
  EXPECT_EQ(Tokens(Load(j), "abc"), (std::vector<std::string>{"ab", "c"}));
  j["model"]["ignore_merges"] = true;
  EXPECT_EQ(Tokens(Load(j), "abc"), (std::vector<std::string>{"abc"}));
}

TEST(Tokenizer, MergesReadAsStringsOrPairs) {
  json strings = Tiny({"a b"});
  json pairs = strings;
  pairs["model"]["merges"] = json::array({json::array({"a", "b"})});
  EXPECT_EQ(Tokens(Load(strings), "ab"), (std::vector<std::string>{"ab"}));
  EXPECT_EQ(Tokens(Load(pairs), "ab"), (std::vector<std::string>{"ab"}));
}

TEST(Tokenizer, Llama3SplitCutsAsItsRegexSays) {
  json split = {{"type", "Split"}, {"pattern", {{"Regex", kLlama3Pattern}}}, {"behavior", "Isolated"}, {"invert", false}};
  json pre = {{"type", "Sequence"},
              {"pretokenizers", json::array({split, {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  const Tokenizer t = Load(Tiny({}, pre));
  // Pieces as the pattern cuts them, each a run of single-byte tokens here (no merges): join
  // them back per piece by decoding each piece's ids. A helper that encodes piece by piece:
  std::vector<PreTokenizerStep> steps;
  PreTokenizerStep s;
  s.pattern = Regex::Compile(kLlama3Pattern).value();
  steps.push_back(s);
  auto pieces = PreTokenize(steps, {"I'VE 12345 apples,  said   he.\n\n\tOK"});
  // (?i:'ve) takes "'VE"; digits go three at a time; a letter run takes one leading non-letter
  // ("," is not a letter, so ",  said" is not one piece: " ?[^\s\p{L}\p{N}]+" takes ","); the
  // spaces before a word keep all but the last ("\s+(?!\S)"), which joins the word.
  EXPECT_EQ(pieces, (std::vector<std::string>{"I", "'VE", " ", "123", "45", " apples", ",", " ", " said", "  ", " he",
                                              ".\n\n", "\tOK"}));
  EXPECT_EQ(*t.Decode(*t.Encode("I'VE 12345 apples")), "I'VE 12345 apples");
}

TEST(Tokenizer, DigitsSplitsEachDigit) {
  json pre = {{"type", "Sequence"},
              {"pretokenizers", json::array({{{"type", "Digits"}, {"individual_digits", true}},
                                             {{"type", "ByteLevel"}, {"add_prefix_space", false}}})}};
  json j = Tiny({"1 2", "a 1"}, pre);
  EXPECT_EQ(Tokens(Load(j), "a12"), (std::vector<std::string>{"a", "1", "2"}));
  j["pre_tokenizer"]["pretokenizers"][0]["individual_digits"] = false;
  EXPECT_EQ(Tokens(Load(j), "a12"), (std::vector<std::string>{"a", "12"}));
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}};
  EXPECT_EQ(Tokens(Load(j), "a12"), (std::vector<std::string>{"a", "12"}));
}

TEST(Tokenizer, SplitBehaviours) {
  auto cut = [](const char* behavior, bool invert) {
    PreTokenizerStep s;
    s.pattern = Regex::Compile("-").value();
    const std::string b = behavior;
    s.behavior = b == "Removed" ? SplitBehavior::kRemoved
                 : b == "Isolated" ? SplitBehavior::kIsolated
                 : b == "MergedWithPrevious" ? SplitBehavior::kMergedWithPrevious
                 : b == "MergedWithNext" ? SplitBehavior::kMergedWithNext
                                         : SplitBehavior::kContiguous;
    s.invert = invert;
    std::vector<std::string> out;
    SplitPiece(s, "the-final--countdown", &out);
    return out;
  };
  using V = std::vector<std::string>;
  // tokenizers' own documentation examples for SplitDelimiterBehavior.
  EXPECT_EQ(cut("Removed", false), (V{"the", "final", "countdown"}));
  EXPECT_EQ(cut("Isolated", false), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(cut("MergedWithPrevious", false), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(cut("MergedWithNext", false), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(cut("Contiguous", false), (V{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(cut("Removed", true), (V{"-", "-", "-"}));
}

TEST(Tokenizer, AddedTokenStripAndSingleWord) {
  json j = Tiny({});
  // Added tokens outside model.vocab are numbered from its size (96 entries here) in list order.
  j["added_tokens"] = json::array({{{"id", 96}, {"content", "<m>"}, {"special", true}, {"lstrip", true}, {"rstrip", true}},
                                   {{"id", 97}, {"content", "cat"}, {"special", false}, {"single_word", true}}});
  const Tokenizer t = Load(j);
  // lstrip / rstrip: the spaces around <m> belong to it.
  EXPECT_EQ(*t.Encode("a  <m>  b"), (std::vector<int32_t>{*t.TokenToId("a"), 96, *t.TokenToId("b")}));
  // single_word: "cat" alone is the added token, inside "cats" it is not.
  EXPECT_EQ(*t.Encode("cat"), (std::vector<int32_t>{97}));
  EXPECT_EQ(*t.Encode("a cat."), (std::vector<int32_t>{*t.TokenToId("a"), *t.TokenToId("Ġ"), 97, *t.TokenToId(".")}));
  const auto cats = *t.Encode("cats");
  EXPECT_EQ(cats.size(), 4u);
  // tokenizers ignores the "id" written in the file; a file whose ids disagree is refused.
  j["added_tokens"][1]["id"] = 300;
  EXPECT_EQ(Tokenizer::FromJson(j, "t.json").status().message(),
            "t.json: added token cat has id 300 where Hugging Face's tokenizers numbers it 97");
}

TEST(Tokenizer, DecodesATokenWithACharacterOutsideTheTableAsItsOwnBytes) {
  json j = Tiny({});
  j["added_tokens"] = json::array({{{"id", 96}, {"content", "中x"}, {"special", false}}});
  const Tokenizer t = Load(j);
  // 'Ã' (U+00C3) and '©' (U+00A9) are the bytes C3 A9: "é".
  j["model"]["vocab"]["Ã"] = 200;
  j["model"]["vocab"]["©"] = 201;
  j["added_tokens"][0]["id"] = 98;
  const Tokenizer u = Load(j);
  EXPECT_EQ(*u.Decode(std::vector<int32_t>{98, 200, 201}), "中xé");
  EXPECT_EQ(*u.Decode(std::vector<int32_t>{200}), "\xEF\xBF\xBD");
  EXPECT_EQ(*t.Decode(*t.Encode("中x")), "中x");
}

TEST(Tokenizer, RefusesWhatItCannotReproduceInOneLine) {
  json j = ReadJson("gpt2.tokenizer.json");
  auto refuse = [](json x) { return Tokenizer::FromJson(x, "t.json").status().message(); };
  json wp = j;
  wp["model"]["type"] = "WordPiece";
  EXPECT_EQ(refuse(wp), "t.json: model type WordPiece is not supported (lockstep reads byte-level BPE tokenizers)");
  json uni = j;
  uni["model"] = {{"type", "Unigram"}, {"vocab", json::array()}};
  EXPECT_EQ(refuse(uni), "t.json: model type Unigram is not supported (lockstep reads byte-level BPE tokenizers)");
  json meta = j;
  meta["pre_tokenizer"] = {{"type", "Metaspace"}};
  EXPECT_EQ(refuse(meta),
            "t.json: pre_tokenizer Metaspace is not supported (lockstep reads byte-level BPE tokenizers: ByteLevel, "
            "Split, Digits, Sequence)");
  json fallback = j;
  fallback["model"]["byte_fallback"] = true;
  EXPECT_EQ(refuse(fallback), "t.json: model.byte_fallback is not supported (a byte-level vocabulary needs none)");
  json merge = j;
  merge["model"]["merges"][7] = "Ġ zzzzqq";
  EXPECT_EQ(refuse(merge), "t.json: merge 7 (Ġ zzzzqq) names a token that is not in the vocabulary");
  EXPECT_EQ(Tokenizer::FromFile("/nonexistent/tokenizer.json").status().message(),
            "tokenizer /nonexistent/tokenizer.json: cannot open it");
}

}  // namespace
}  // namespace lockstep::text
