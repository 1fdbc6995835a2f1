#include "lockstep/cli/tokens_command.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "lockstep/cli/text_inputs.h"
#include "lockstep/data/text_tokens.h"
#include "lockstep/data/token_file.h"
#include "lockstep/text/tokenizer.h"

namespace lockstep::cli {
namespace {

constexpr int64_t kBlockBytes = int64_t{8} << 20;

// Encodes pieces of text on `threads` threads, each with its own cached encoder, and appends the
// ids to the writer in input order. A piece is a whole document or a part of one cut where the
// cut changes no token (Tokenizer::NextCut).
class ParallelEncoder {
 public:
  // `mask`: also write the loss mask (1 everywhere but a prompt's tokens); may be null.
  ParallelEncoder(const text::Tokenizer& t, int threads, data::LlmcTokenWriter* out, data::LlmcTokenWriter* mask)
      : t_(t), out_(out), mask_(mask), encoders_(), threads_(threads) {
    for (int i = 0; i < threads; ++i) encoders_.emplace_back(t);
  }
  // `end_of_document` appends the end-of-text token after the text. A `prompt` comes first and
  // is encoded apart (no token straddles prompt and text); the mask leaves its tokens out.
  Status Add(std::string text, std::string where, bool end_of_document, std::string prompt = {}) {
    pending_.push_back({std::move(text), std::move(where), end_of_document, std::move(prompt)});
    pending_bytes_ += pending_.back().text.size() + pending_.back().prompt.size();
    if (static_cast<int>(pending_.size()) >= 4 * threads_ || pending_bytes_ >= static_cast<size_t>(kBlockBytes) * threads_)
      return Flush();
    return Status::Ok();
  }
  Status Flush() {
    std::vector<std::vector<int32_t>> ids(pending_.size());
    std::vector<size_t> prompt_ids(pending_.size(), 0);
    std::vector<Status> status(pending_.size());
    auto work = [&](int w) {
      for (size_t i = static_cast<size_t>(w); i < pending_.size(); i += static_cast<size_t>(threads_)) {
        status[i] = encoders_[w].Append(pending_[i].prompt, &ids[i]);
        prompt_ids[i] = ids[i].size();
        if (status[i].ok()) status[i] = encoders_[w].Append(pending_[i].text, &ids[i]);
        if (status[i].ok() && pending_[i].end && t_.end_of_text()) ids[i].push_back(*t_.end_of_text());
      }
    };
    std::vector<std::thread> pool;
    for (int w = 1; w < threads_; ++w) pool.emplace_back(work, w);
    work(0);
    for (auto& th : pool) th.join();
    for (size_t i = 0; i < pending_.size(); ++i) {
      if (!status[i].ok()) return Status::InvalidArgument(pending_[i].where + ": " + status[i].message());
      LS_RETURN_IF_ERROR(out_->Append(ids[i]));
      if (mask_ != nullptr) {
        std::vector<int32_t> m(ids[i].size(), 1);
        std::fill(m.begin(), m.begin() + static_cast<std::ptrdiff_t>(prompt_ids[i]), 0);
        trained_ += static_cast<int64_t>(ids[i].size() - prompt_ids[i]);
        LS_RETURN_IF_ERROR(mask_->Append(m));
      }
      if (pending_[i].end) ++documents_;
    }
    pending_.clear();
    pending_bytes_ = 0;
    return Status::Ok();
  }
  int64_t documents() const { return documents_; }
  int64_t trained() const { return trained_; }  // tokens the mask keeps

 private:
  struct Piece {
    std::string text, where;
    bool end;
    std::string prompt;
  };
  const text::Tokenizer& t_;
  data::LlmcTokenWriter* out_;
  data::LlmcTokenWriter* mask_;
  int64_t trained_ = 0;
  std::vector<text::Tokenizer::Encoder> encoders_;
  int threads_;
  std::vector<Piece> pending_;
  size_t pending_bytes_ = 0;
  int64_t documents_ = 0;
};

// One text file as one document, in pieces cut where the tokenizer allows.
Status EncodeFile(const text::Tokenizer& t, const std::string& path, ParallelEncoder* enc, int64_t* bytes) {
  std::string carry;
  int64_t carry_offset = 0;
  Status s = ForEachTextBlock(path, kBlockBytes, [&](std::string_view block, int64_t offset) -> Status {
    if (carry.empty()) carry_offset = offset;
    carry.append(block);
    *bytes += static_cast<int64_t>(block.size());
    // The last cut inside what is held; the rest waits for the next block.
    size_t cut = 0;
    for (size_t at = t.NextCut(carry, 1); at < carry.size(); at = t.NextCut(carry, at + 1)) cut = at;
    if (cut == 0) return Status::Ok();
    LS_RETURN_IF_ERROR(enc->Add(carry.substr(0, cut), path + " (bytes from " + std::to_string(carry_offset) + ")", false));
    carry.erase(0, cut);
    carry_offset += static_cast<int64_t>(cut);
    return Status::Ok();
  });
  LS_RETURN_IF_ERROR(s);
  return enc->Add(std::move(carry), path + " (bytes from " + std::to_string(carry_offset) + ")", true);
}

Status EncodeJsonl(const TokensArgs& a, ParallelEncoder* enc, int64_t* bytes) {
  std::ifstream in(a.from_jsonl, std::ios::binary);
  if (!in) return Status::NotFound("--from-jsonl " + a.from_jsonl + ": cannot open it");
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    *bytes += static_cast<int64_t>(line.size()) + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = a.from_jsonl + " line " + std::to_string(n);
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument(where + ": not a JSON object");
    auto field = [&](const std::string& key) -> Result<std::string> {
      auto it = j.find(key);
      if (it == j.end()) return Status::InvalidArgument(where + ": no key \"" + key + "\"");
      if (!it->is_string()) return Status::InvalidArgument(where + ": \"" + key + "\" is not a string");
      return it->get<std::string>();
    };
    if (a.prompt_key.empty()) {
      LS_ASSIGN_OR_RETURN(std::string text, field(a.text_key));
      LS_RETURN_IF_ERROR(enc->Add(std::move(text), where, true));
    } else {
      LS_ASSIGN_OR_RETURN(std::string prompt, field(a.prompt_key));
      LS_ASSIGN_OR_RETURN(std::string response, field(a.response_key));
      LS_RETURN_IF_ERROR(enc->Add(std::move(response), where, true, std::move(prompt)));
    }
  }
  return Status::Ok();
}

Status RunBpe(const TokensArgs& a) {
  const auto t0 = std::chrono::steady_clock::now();
  LS_ASSIGN_OR_RETURN(text::Tokenizer t, text::Tokenizer::FromFile(a.tokenizer));
  const bool wide = t.vocab_size() > 65536;
  LS_RETURN_IF_ERROR(MakeParentDirs(a.out));
  LS_ASSIGN_OR_RETURN(data::LlmcTokenWriter writer, data::LlmcTokenWriter::Create(a.out, wide));
  std::optional<data::LlmcTokenWriter> mask;
  if (!a.prompt_key.empty()) {
    if (!t.end_of_text())
      return Status::InvalidArgument("tokens: instruction pairs need a tokenizer with an end-of-text token (to end each "
                                     "response); " + a.tokenizer + " has none");
    LS_ASSIGN_OR_RETURN(data::LlmcTokenWriter m, data::LlmcTokenWriter::CreateLossMask(a.out + ".mask"));
    mask.emplace(std::move(m));
  }
  const int threads = a.threads > 0 ? a.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ParallelEncoder enc(t, threads, &writer, mask ? &*mask : nullptr);
  int64_t bytes = 0;
  if (!a.from_jsonl.empty()) {
    LS_RETURN_IF_ERROR(EncodeJsonl(a, &enc, &bytes));
  } else {
    LS_ASSIGN_OR_RETURN(std::vector<std::string> files, ListTextFiles(a.from_text));
    for (const std::string& f : files) LS_RETURN_IF_ERROR(EncodeFile(t, f, &enc, &bytes));
  }
  LS_RETURN_IF_ERROR(enc.Flush());
  const int64_t tokens = writer.count();
  if (tokens == 0) return Status::InvalidArgument("the input holds no text: no token file written");
 if (mask) LS_RETURN_IF_ERROR(mask->Finish());  // first: a token file never lacks its finished mask
  LS_RETURN_IF_ERROR(writer.Finish());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string eot = t.end_of_text() ? t.IdToToken(*t.end_of_text()) : std::string();
  std::printf("wrote %s: %lld tokens (%s, vocab %d) from %lld document%s, %lld bytes (%.2f bytes a token)%s\n",
              a.out.c_str(), static_cast<long long>(tokens), wide ? "uint32" : "uint16", t.vocab_size(),
              static_cast<long long>(enc.documents()), enc.documents() == 1 ? "" : "s", static_cast<long long>(bytes),
              double(bytes) / double(tokens),
              eot.empty() ? ", no end-of-text token to separate documents"
                          : (", each followed by " + eot).c_str());
  if (mask) {
    std::printf("wrote %s.mask: the loss trains on %lld of the %lld tokens (the responses and their end-of-text); "
                "train with data.loss_mask = true\n",
                a.out.c_str(), static_cast<long long>(enc.trained()), static_cast<long long>(tokens));
  }
  std::printf("time: %.1f s (%.1f MB/s, %d threads)\n", s, s > 0 ? double(bytes) / 1e6 / s : 0.0, threads);
  return Status::Ok();
}

}  // namespace

CLI::App* AddTokensCommand(CLI::App& app, TokensArgs* args) {
  CLI::App* c = app.add_subcommand("tokens", "write a token file (llm.c format) for data.kind = \"tokens\"");
  auto* text = c->add_option("--from-text", args->from_text,
                             "text files or directories (a directory: the files data.kind = \"text\" reads); without "
                             "--tokenizer one path, one token per byte");
  auto* jsonl = c->add_option("--from-jsonl", args->from_jsonl, "a JSON-lines file, one document per line (with --text-key)")
                    ->excludes(text);
  c->add_option("--text-key", args->text_key, "the key of each --from-jsonl line that holds its text");
  c->add_option("--prompt-key", args->prompt_key,
                "instruction pairs: the key of each --from-jsonl line's prompt (its tokens are not trained on)");
  c->add_option("--response-key", args->response_key, "instruction pairs: the key of each line's response");
  c->add_option("--tokenizer", args->tokenizer, "a Hugging Face tokenizer.json (byte-level BPE)");
  c->add_option("--threads", args->threads, "encoding threads (default: all cores)")->check(CLI::Range(1, 1024));
  c->add_option("--out", args->out, "the token file to write")->required();
  (void)jsonl;
  return c;
}

Status RunTokensCommand(const TokensArgs& args) {
  if (args.from_text.empty() && args.from_jsonl.empty())
    return Status::InvalidArgument("tokens: --from-text or --from-jsonl is required");
  const bool pairs = !args.prompt_key.empty() || !args.response_key.empty();
  if (pairs && (args.prompt_key.empty() || args.response_key.empty()))
    return Status::InvalidArgument("tokens: --prompt-key and --response-key go together");
  if (pairs && !args.text_key.empty())
    return Status::InvalidArgument("tokens: --text-key or --prompt-key/--response-key, not both");
  if (!args.from_jsonl.empty() && args.text_key.empty() && !pairs)
    return Status::InvalidArgument("tokens: --from-jsonl needs --text-key, or --prompt-key and --response-key");
  if ((!args.text_key.empty() || pairs) && args.from_jsonl.empty())
    return Status::InvalidArgument("tokens: --text-key, --prompt-key and --response-key go with --from-jsonl");
  if (!args.tokenizer.empty()) return RunBpe(args);
  if (!args.from_jsonl.empty()) return Status::InvalidArgument("tokens: --from-jsonl needs --tokenizer");
  if (args.from_text.size() != 1)
    return Status::InvalidArgument("tokens: byte-level tokens (no --tokenizer) take one --from-text path");
  LS_ASSIGN_OR_RETURN(data::TextTokensSummary s, data::WriteTextAsTokens(args.from_text[0], args.out));
  std::printf("wrote %s: %lld tokens (byte-level, vocab 256) from %lld file%s of %s\n", args.out.c_str(),
              static_cast<long long>(s.tokens), static_cast<long long>(s.files), s.files == 1 ? "" : "s",
              args.from_text[0].c_str());
  return Status::Ok();
}

}  // namespace lockstep::cli
