// Token files (llm.c and raw nanoGPT formats), token corpora over several shards, and the
// windows the loaders cut from them: the same as the text loader's over the same ids.
#include "lockstep/data/token_corpus.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "data/data_test_util.h"
#include "lockstep/core/rng.h"
#include "lockstep/data/text_loaders.h"

namespace lockstep::data {
namespace {

using testing::TempDir;
using testing::WriteFile;

std::vector<uint16_t> AllTokens(const TokenFile& f) {
  std::vector<int32_t> v(static_cast<size_t>(f.size()));
  f.Copy(0, f.size(), v.data());
  return std::vector<uint16_t>(v.begin(), v.end());
}

std::vector<uint8_t> LlmcBytes(int32_t magic, int32_t version, int32_t count, const std::vector<uint16_t>& tokens) {
  std::vector<uint8_t> out(kLlmcHeaderBytes, 0);
  const int32_t h[3] = {magic, version, count};
  std::memcpy(out.data(), h, sizeof(h));
  out.resize(out.size() + tokens.size() * 2);
  if (!tokens.empty()) std::memcpy(out.data() + kLlmcHeaderBytes, tokens.data(), tokens.size() * 2);
  return out;
}

std::vector<uint8_t> RawBytes(const std::vector<uint16_t>& tokens) {
  const auto* p = reinterpret_cast<const uint8_t*>(tokens.data());
  return std::vector<uint8_t>(p, p + tokens.size() * 2);
}

std::vector<uint16_t> Iota(int n, int mod) {
  std::vector<uint16_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = static_cast<uint16_t>(i % mod);
  return t;
}

TEST(TokenFile, ReadsBothFormats) {
  TempDir dir;
  const std::vector<uint16_t> tokens = {1, 50256, 7, 65535, 0};
  ASSERT_TRUE(WriteLlmcTokenFile(dir / "a.bin", tokens).ok());
  // The writer's bytes are llm.c's: header of 256 int32 then the uint16s.
  EXPECT_EQ(testing::ReadFileBytes(dir / "a.bin"), LlmcBytes(kLlmcTokensMagic, 1, 5, tokens));
  auto llmc = TokenFile::Open(dir / "a.bin", TokenFormat::kAuto);
  ASSERT_TRUE(llmc.ok()) << llmc.status().ToString();
  EXPECT_EQ(llmc->format(), TokenFormat::kLlmc);
  EXPECT_EQ(AllTokens(*llmc), tokens);
  EXPECT_EQ(llmc->MaxToken().value, 65535);
  EXPECT_EQ(llmc->MaxToken().index, 3);

  WriteFile(dir / "train.bin", RawBytes(tokens));
  auto raw = TokenFile::Open(dir / "train.bin", TokenFormat::kAuto);
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  EXPECT_EQ(raw->format(), TokenFormat::kRaw);
  EXPECT_EQ(AllTokens(*raw), tokens);
  // An explicit raw format reads even an llm.c file as raw uint16 (header included).
  auto forced = TokenFile::Open(dir / "a.bin", TokenFormat::kRaw);
  ASSERT_TRUE(forced.ok());
  EXPECT_EQ(forced->size(), 512 + 5);
}

// llm.c's uint32 files (its Llama 3 format: magic 20240801, version 7), streamed by the writer.
TEST(TokenFile, ReadsAndStreamsUint32Files) {
  TempDir dir;
  const std::vector<int32_t> tokens = {1, 128000, 7, 70000, 0, 128255};
  auto w = LlmcTokenWriter::Create(dir / "wide.bin", /*wide=*/true);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->Append(std::span(tokens).first(2)).ok());
  EXPECT_FALSE(std::ifstream(dir / "wide.bin").good()) << "the file appears only when finished";
  ASSERT_TRUE(w->Append(std::span(tokens).subspan(2)).ok());
  ASSERT_TRUE(w->Finish().ok());
  std::vector<uint8_t> expect(1024, 0);
  const int32_t header[3] = {20240801, 7, 6};
  std::memcpy(expect.data(), header, sizeof header);
  for (int32_t t : tokens)
    for (int b = 0; b < 4; ++b) expect.push_back(static_cast<uint8_t>(static_cast<uint32_t>(t) >> (8 * b)));
  EXPECT_EQ(testing::ReadFileBytes(dir / "wide.bin"), expect);
  auto f = TokenFile::Open(dir / "wide.bin", TokenFormat::kAuto);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE(f->wide());
  std::vector<int32_t> back(6);
  f->Copy(0, 6, back.data());
  EXPECT_EQ(back, tokens);
  EXPECT_EQ(f->MaxToken().value, 128255u);
  EXPECT_EQ(f->MaxToken().index, 5);
  // A uint16 writer refuses an id that does not fit, naming it; the temporary file goes.
  {
    auto narrow = LlmcTokenWriter::Create(dir / "narrow.bin", /*wide=*/false);
    ASSERT_TRUE(narrow.ok());
    EXPECT_EQ(narrow->Append(tokens).message(), "token 128000 does not fit a uint16 token file");
  }
  EXPECT_FALSE(std::ifstream(dir / "narrow.bin.tmp").good());
  // A truncated uint32 file is named as such.
  expect.resize(expect.size() - 2);
  WriteFile(dir / "short.bin", expect);
  EXPECT_NE(TokenFile::Open(dir / "short.bin", TokenFormat::kAuto).status().message().find("is truncated"),
            std::string::npos);
}

TEST(TokenFile, BadFilesAreOneLineNamingTheFile) {
  TempDir dir;
  const std::vector<uint16_t> t = Iota(10, 100);
  struct Case {
    std::string name;
    std::vector<uint8_t> bytes;
    TokenFormat format;
    std::string expect;
  };
  std::vector<uint8_t> truncated = LlmcBytes(kLlmcTokensMagic, 1, 10, t);
  truncated.resize(truncated.size() - 3);
  std::vector<uint8_t> trailing = LlmcBytes(kLlmcTokensMagic, 1, 10, t);
  trailing.push_back(0);
  trailing.push_back(0);
  std::vector<uint8_t> odd = RawBytes(t);
  odd.pop_back();
  const std::vector<Case> cases = {
      {"empty.bin", {}, TokenFormat::kAuto, "is empty"},
      {"truncated.bin", truncated, TokenFormat::kAuto, "is truncated: its header says 10 tokens (1044 bytes)"},
      {"trailing.bin", trailing, TokenFormat::kAuto, "has trailing bytes"},
      {"magic.bin", LlmcBytes(12345, 1, 10, t), TokenFormat::kLlmc, "has magic 12345, not llm.c's token magic"},
      {"version.bin", LlmcBytes(kLlmcTokensMagic, 2, 10, t), TokenFormat::kAuto, "has llm.c version 2, expected 1"},
      {"zero.bin", LlmcBytes(kLlmcTokensMagic, 1, 0, {}), TokenFormat::kAuto, "has no tokens"},
      {"short.bin", std::vector<uint8_t>(100, 0), TokenFormat::kLlmc, "shorter than llm.c's 1024-byte header"},
      {"odd.bin", odd, TokenFormat::kRaw, "is truncated: 19 bytes is not a whole number"},
      {"model.bin", LlmcBytes(kLlmcModelMagic, 3, 10, t), TokenFormat::kAuto, "is an llm.c model checkpoint"},
  };
  for (const Case& c : cases) {
    WriteFile(dir / c.name, c.bytes);
    auto f = TokenFile::Open(dir / c.name, c.format);
    ASSERT_FALSE(f.ok()) << c.name;
    EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument) << c.name;
    const std::string& m = f.status().message();
    EXPECT_NE(m.find(dir / c.name), std::string::npos) << m;
    EXPECT_NE(m.find(c.expect), std::string::npos) << c.name << ": " << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  auto missing = TokenFile::Open(dir / "nope.bin", TokenFormat::kAuto);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(ParseTokenFormat("llm.c").ok());
}

TEST(TokenCorpus, ShardsAreOneStreamInNameOrder) {
  TempDir dir;
  const std::vector<uint16_t> all = Iota(3000, 1000);
  // Written out of order, named so that byte order is the stream order; a raw shard between
  // llm.c ones (formats may mix under "auto").
  ASSERT_TRUE(WriteLlmcTokenFile(dir / "s_002.bin", {all.begin() + 2000, all.end()}).ok());
  ASSERT_TRUE(WriteLlmcTokenFile(dir / "s_000.bin", {all.begin(), all.begin() + 700}).ok());
  WriteFile(dir / "s_001.bin", RawBytes({all.begin() + 700, all.begin() + 2000}));
  TokenCorpusOptions o;
  o.train = dir / "s_*.bin";
  o.vocab = 1000;
  o.context = 16;
  auto c = TokenCorpus::Load(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->train()->files().size(), 3u);
  EXPECT_EQ(c->train()->size(), 2700);  // floor(0.9 * 3000)
  EXPECT_EQ(c->val()->size(), 300);
  std::vector<int32_t> got(2700);
  c->train()->Read(0, 2700, got.data());
  for (int i = 0; i < 2700; ++i) ASSERT_EQ(got[i], all[i]) << i;
  // Windows straddling a shard boundary.
  std::vector<int32_t> w(17);
  c->train()->Read(690, 17, w.data());
  for (int i = 0; i < 17; ++i) EXPECT_EQ(w[i], all[690 + i]);
  c->val()->Read(0, 300, got.data());
  for (int i = 0; i < 300; ++i) ASSERT_EQ(got[i], all[2700 + i]) << i;

  // An explicit validation file replaces the split.
  ASSERT_TRUE(WriteLlmcTokenFile(dir / "val.bin", Iota(40, 5)).ok());
  o.val = dir / "val.bin";
  auto both = TokenCorpus::Load(o);
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  EXPECT_EQ(both->train()->size(), 3000);
  EXPECT_EQ(both->val()->size(), 40);
}

TEST(TokenCorpus, Errors) {
  TempDir dir;
  ASSERT_TRUE(WriteLlmcTokenFile(dir / "a.bin", Iota(500, 300)).ok());
  TokenCorpusOptions o;
  o.train = dir / "a.bin";
  o.vocab = 256;
  o.context = 8;
  auto big = TokenCorpus::Load(o);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().message(),
            "token file " + (dir / "a.bin") + " holds token 299 at position 299, not below model.vocab = 256");
  o.vocab = 300;
  ASSERT_TRUE(TokenCorpus::Load(o).ok());

  o.train = dir / "none*.bin";
  auto none = TokenCorpus::Load(o);
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("data.train: no token file matches"), std::string::npos);

  o.train = dir / "a.bin";
  o.context = 300;  // 450 training tokens < 2 * 300
  auto small = TokenCorpus::Load(o);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("too few for context 300"), std::string::npos) << small.status().message();
  o.context = 8;
  o.val = dir / "nothing.bin";
  EXPECT_EQ(TokenCorpus::Load(o).status().code(), StatusCode::kNotFound);
}

// A byte-level token file gives the text loader's batches, window for window, whatever the
// sharding of the file.
TEST(TokenCorpus, WindowsEqualTheTextLoadersOverTheSameIds) {
  TempDir dir;
  Rng rng(5, 0);
  std::vector<uint8_t> bytes(5000);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng.NextU32());
  auto text = std::make_shared<const ByteCorpus>(ByteCorpus::FromBytes(bytes, "bytes"));
  const std::vector<uint16_t> ids(bytes.begin(), bytes.end());
  ASSERT_TRUE(WriteLlmcTokenFile(dir / "p0.bin", {ids.begin(), ids.begin() + 1234}).ok());
  ASSERT_TRUE(WriteLlmcTokenFile(dir / "p1.bin", {ids.begin() + 1234, ids.end()}).ok());
  TokenCorpusOptions o;
  o.train = dir / "p*.bin";
  o.vocab = 256;
  o.context = 16;
  auto tokens = TokenCorpus::Load(o);
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  SamplerOptions s;
  s.global_batch = 8;
  s.world_size = 2;
  s.rank = 1;
  s.seed = 9;
  auto a = MakeTextTrainLoader(text, 16, s);
  auto b = MakeWindowTrainLoader(tokens->train(), 16, s);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ((*a)->StepsPerEpoch(), (*b)->StepsPerEpoch());
  TextBatch x, y;
  for (int step = 0; step < 2 * (*a)->StepsPerEpoch() + 3; ++step) {
    ASSERT_TRUE((*a)->Next(&x).ok() && (*b)->Next(&y).ok());
    ASSERT_EQ(x.x, y.x) << step;
    ASSERT_EQ(x.y, y.y) << step;
  }
  s.shuffle = false;
  auto av = MakeTextValLoader(text, 16, s, 0);
  auto bv = MakeWindowValLoader(tokens->val(), 16, s, 0);
  ASSERT_TRUE(av.ok() && bv.ok());
  ASSERT_EQ((*av)->StepsPerEpoch(), (*bv)->StepsPerEpoch());
  ASSERT_TRUE((*av)->Next(&x).ok() && (*bv)->Next(&y).ok());
  EXPECT_EQ(x.x, y.x);
}

// data.loss_mask: a target whose mask byte is 0 becomes -1 (the loss ignores it), the others
// stay; the mask of a window's targets is that of the ids after its inputs, across files.
TEST(TokenCorpus, LossMaskHidesTheTargetsItMarksZero) {
  TempDir dir;
  std::vector<int32_t> ids, mask;
  for (int i = 0; i < 600; ++i) {
    ids.push_back(i % 200);
    mask.push_back((i / 3) % 2);  // runs of three trained, three not
  }
  for (int part = 0; part < 2; ++part) {
    const std::string name = dir / (part == 0 ? "m0.bin" : "m1.bin");
    auto tw = LlmcTokenWriter::Create(name, false);
    auto mw = LlmcTokenWriter::CreateLossMask(name + ".mask");
    ASSERT_TRUE(tw.ok() && mw.ok());
    const size_t from = part == 0 ? 0 : 250, to = part == 0 ? 250 : 600;
    ASSERT_TRUE(tw->Append({ids.data() + from, to - from}).ok());
    ASSERT_TRUE(mw->Append({mask.data() + from, to - from}).ok());
    ASSERT_TRUE(mw->Finish().ok() && tw->Finish().ok());
  }
  TokenCorpusOptions o;
  o.train = dir / "m*.bin";
  o.vocab = 256;
  o.context = 16;
  o.loss_mask = true;
  auto corpus = TokenCorpus::Load(o);
  ASSERT_TRUE(corpus.ok()) << corpus.status().ToString();
  SamplerOptions s;
  s.global_batch = 4;
  s.seed = 3;
  auto loader = MakeWindowTrainLoader(corpus->train(), 16, s);
  ASSERT_TRUE(loader.ok());
  TextBatch b;
  int64_t hidden = 0, kept = 0;
  for (int step = 0; step < 6; ++step) {
    ASSERT_TRUE((*loader)->Next(&b).ok());
    for (int64_t r = 0; r < b.B; ++r) {
      const int32_t* x = b.x.data() + r * 16;
      const int32_t* y = b.y.data() + r * 16;
      // ids repeat every 200 positions: the row starts at x[0], x[0] + 200 or x[0] + 400, and
      // at one of them every target is the next id where its mask is 1 and -1 where it is 0.
      bool found = false;
      for (int64_t p = x[0]; p + 17 <= 540 && !found; p += 200) {
        bool ok = true;
        for (int64_t k = 0; k < 16; ++k) ok = ok && x[k] == ids[p + k] && y[k] == (mask[p + k + 1] ? ids[p + k + 1] : -1);
        found = ok;
      }
      ASSERT_TRUE(found) << "a row whose targets do not follow the mask of the ids after its inputs";
      for (int64_t k = 0; k < 16; ++k) (y[k] < 0 ? hidden : kept)++;
    }
  }
  EXPECT_GT(hidden, 100);
  EXPECT_GT(kept, 100);
  // A missing mask is named.
  std::filesystem::remove(dir / "m1.bin.mask");
  EXPECT_EQ(TokenCorpus::Load(o).status().message(),
            "data.loss_mask: " + (dir / "m1.bin.mask") + " does not exist (lockstep tokens --prompt-key ... writes it)");
}

int64_t RssKb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  return -1;
}

// Reading every window of a 16 MB file leaves the process's resident size where it was: the
// pages each read touched are handed back (a corpus larger than RAM trains in flat memory).
TEST(TokenCorpus, ReadingTheWholeFileKeepsResidentMemoryFlat) {
#if defined(__SANITIZE_ADDRESS__)
  // ASan's quarantine and shadow pages are resident memory of their own: RSS measures the
  // sanitizer there, not the corpus. The Release pass runs this test.
  GTEST_SKIP() << "resident size is not the corpus's under AddressSanitizer";
#endif
  TempDir dir(TempDir::Medium::kDisk);  // a file on tmpfs is resident memory itself
  const int64_t n = int64_t{8} << 20;   // 8M tokens = 16 MB
  {
    std::vector<uint16_t> t(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = static_cast<uint16_t>(i * 7919 % 50257);
    ASSERT_TRUE(WriteLlmcTokenFile(dir / "big.bin", t).ok());
  }
  const int64_t before = RssKb();
  TokenCorpusOptions o;
  o.train = dir / "big.bin";
  o.vocab = 50257;
  o.context = 1024;
  auto c = TokenCorpus::Load(o);  // scans every token for the vocabulary check
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::vector<int32_t> w(1025);
  for (int64_t at = 0; at + 1025 <= c->train()->size(); at += 1024) c->train()->Read(at, 1025, w.data());
  EXPECT_EQ(w[0], static_cast<int32_t>((c->train()->size() / 1024 - 1) * 1024 * 7919 % 50257));
  const int64_t after = RssKb();
  ASSERT_GT(before, 0);
  EXPECT_LT(after - before, 4 * 1024) << "resident memory grew by " << (after - before) << " KB reading 16 MB";
}

}  // namespace
}  // namespace lockstep::data
