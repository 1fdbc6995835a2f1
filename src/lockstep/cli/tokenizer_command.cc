#include "lockstep/cli/tokenizer_command.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "lockstep/text/bpe_trainer.h"
#include "lockstep/cli/text_inputs.h"
#include "lockstep/text/tokenizer.h"

namespace lockstep::cli {
namespace {

// The whole of a file, or of standard input for "-".
Result<std::string> ReadInput(const std::string& path) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open it");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

Status Train(const TokenizerArgs& a) {
  text::BpeTrainerOptions o;
  o.vocab_size = a.vocab_size;
  o.pre_tokenizer = a.pre_tokenizer == "llama3" ? text::PreTokenizerKind::kLlama3 : text::PreTokenizerKind::kGpt2;
  o.special_tokens = a.special;
  o.min_frequency = a.min_frequency;
  o.threads = a.threads > 0 ? a.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  text::BpeTrainer trainer(o);
  LS_RETURN_IF_ERROR(trainer.CheckOptions());  // before reading gigabytes of text
  const auto t0 = std::chrono::steady_clock::now();
  LS_ASSIGN_OR_RETURN(std::vector<std::string> files, ListTextFiles(a.from_text));
  int64_t bytes = 0;
  for (const std::string& f : files) {
    LS_RETURN_IF_ERROR(ForEachTextBlock(f, int64_t{64} << 20, [&](std::string_view block, int64_t offset) {
      bytes += static_cast<int64_t>(block.size());
      return trainer.AddText(block, f, offset);
    }));
  }
  const auto t1 = std::chrono::steady_clock::now();
  LS_ASSIGN_OR_RETURN(text::TrainedBpe trained, trainer.Train());
  const auto t2 = std::chrono::steady_clock::now();
  // Written whole to a temporary name, then renamed: no half-written tokenizer.json.
  LS_RETURN_IF_ERROR(MakeParentDirs(a.out));
  const std::string tmp = a.out + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Status::IoError(a.out + ": cannot write it");
    out << trained.tokenizer.dump(2) << "\n";
    if (!out.flush()) return Status::IoError(a.out + ": write failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, a.out, ec);
  if (ec) return Status::IoError(a.out + ": " + ec.message());
  const double count_s = std::chrono::duration<double>(t1 - t0).count();
  const double merge_s = std::chrono::duration<double>(t2 - t1).count();
  const int64_t vocab = static_cast<int64_t>(trained.tokenizer["model"]["vocab"].size());
  std::printf("wrote %s: vocabulary %lld (%zu special, 256 bytes, %lld merges), pre-tokenizer %s\n", a.out.c_str(),
              static_cast<long long>(vocab), a.special.size(), static_cast<long long>(trained.merges), a.pre_tokenizer.c_str());
  std::printf("read %lld bytes in %zu file%s: %lld words, %lld distinct; %lld tokens after the merges (%.2f bytes a token)\n",
              static_cast<long long>(bytes), files.size(), files.size() == 1 ? "" : "s",
              static_cast<long long>(trainer.words_seen()), static_cast<long long>(trainer.distinct_words()),
              static_cast<long long>(trained.tokens), trained.tokens > 0 ? double(bytes) / double(trained.tokens) : 0.0);
  std::printf("time: %.1f s counting words (%.1f MB/s, %d threads), %.1f s merging\n", count_s,
              count_s > 0 ? double(bytes) / 1e6 / count_s : 0.0, o.threads, merge_s);
  return Status::Ok();
}

Status Encode(const TokenizerArgs& a) {
  LS_ASSIGN_OR_RETURN(text::Tokenizer t, text::Tokenizer::FromFile(a.tokenizer));
  LS_ASSIGN_OR_RETURN(std::string input, ReadInput(a.input));
  text::Tokenizer::Encoder encoder(t);
  std::vector<int32_t> ids;
  if (Status s = encoder.Append(input, &ids); !s.ok()) {
    return Status::InvalidArgument((a.input == "-" ? std::string("standard input") : a.input) + ": " + s.message());
  }
  std::string line;
  line.reserve(ids.size() * 6);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) line.push_back(' ');
    line += std::to_string(ids[i]);
  }
  line.push_back('\n');
  std::fwrite(line.data(), 1, line.size(), stdout);
  return Status::Ok();
}

Status Decode(const TokenizerArgs& a) {
  LS_ASSIGN_OR_RETURN(text::Tokenizer t, text::Tokenizer::FromFile(a.tokenizer));
  LS_ASSIGN_OR_RETURN(std::string input, ReadInput(a.input));
  const std::string where = a.input == "-" ? std::string("standard input") : a.input;
  std::vector<int32_t> ids;
  std::istringstream in(input);
  std::string word;
  while (in >> word) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(word, &used);
    } catch (...) {
      used = 0;
    }
    if (used != word.size() || v < 0 || v > INT32_MAX)
      return Status::InvalidArgument(where + ": \"" + word + "\" is not a token id (ids are non-negative integers separated by spaces)");
    if (v >= t.vocab_size())
      return Status::InvalidArgument(where + ": token id " + word + " is not below the vocabulary size " + std::to_string(t.vocab_size()));
    ids.push_back(static_cast<int32_t>(v));
  }
  LS_ASSIGN_OR_RETURN(std::string text, t.Decode(ids));
  std::fwrite(text.data(), 1, text.size(), stdout);
  return Status::Ok();
}

}  // namespace

CLI::App* AddTokenizerCommand(CLI::App& app, TokenizerArgs* a) {
  CLI::App* c = app.add_subcommand("tokenizer", "train, encode with, decode with a byte-level BPE tokenizer (Hugging Face tokenizer.json)");
  c->require_subcommand(1);
  a->train = c->add_subcommand("train", "learn a byte-level BPE tokenizer from text files; writes tokenizer.json");
  a->train->add_option("--from-text", a->from_text, "text files or directories (UTF-8; a directory: its dot-less files, name-sorted)")
      ->required();
  a->train->add_option("--vocab-size", a->vocab_size, "vocabulary size: special tokens + 256 bytes + merges")->required()
      ->check(CLI::Range(1, 1 << 24));
  a->train->add_option("--pre-tokenizer", a->pre_tokenizer, "gpt2 (GPT-2's regex) or llama3 (Llama 3's)")
      ->check(CLI::IsMember({"gpt2", "llama3"}));
  a->train->add_option("--special", a->special, "a special token (repeatable; ids 0, 1, ... in order)");
  a->train->add_option("--min-frequency", a->min_frequency, "never merge a pair seen fewer times (default 0)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 62));
  a->train->add_option("--threads", a->threads, "threads counting words (default: all cores)")->check(CLI::Range(1, 1024));
  a->train->add_option("--out", a->out, "the tokenizer.json to write")->required();
  a->encode = c->add_subcommand("encode", "print the ids of a text, space separated (nothing added: no BOS/EOS)");
  a->encode->add_option("--tokenizer", a->tokenizer, "a tokenizer.json")->required();
  a->encode->add_option("TEXT_FILE", a->input, "the text (default -: standard input)");
  a->decode = c->add_subcommand("decode", "print the text of token ids (space or newline separated)");
  a->decode->add_option("--tokenizer", a->tokenizer, "a tokenizer.json")->required();
  a->decode->add_option("IDS_FILE", a->input, "the ids (default -: standard input)");
  return c;
}

Status RunTokenizerCommand(const TokenizerArgs& a) {
  if (a.train->parsed()) return Train(a);
  if (a.encode->parsed()) return Encode(a);
  return Decode(a);
}

}  // namespace lockstep::cli
