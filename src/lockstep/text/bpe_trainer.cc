#include "lockstep/text/bpe_trainer.h"

#include <algorithm>
#include <map>
#include <queue>
#include <thread>
#include <memory>

#include <nlohmann/json.hpp>

#include "lockstep/text/byte_level.h"
#include "lockstep/text/pre_tokenizer.h"
#include "lockstep/text/tokenizer.h"
#include "lockstep/text/utf8.h"

namespace lockstep::text {
namespace {

using nlohmann::json;

using Pair = std::pair<int32_t, int32_t>;
struct PairHash {
  size_t operator()(const Pair& p) const { return std::hash<uint64_t>()((uint64_t(uint32_t(p.first)) << 32) | uint32_t(p.second)); }
};

}  // namespace

json PreTokenizerJson(PreTokenizerKind kind) {
  json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  if (kind == PreTokenizerKind::kGpt2) return byte_level;
  byte_level["use_regex"] = false;
  json split = {{"type", "Split"}, {"pattern", {{"Regex", kLlama3Pattern}}}, {"behavior", "Isolated"}, {"invert", false}};
  return {{"type", "Sequence"}, {"pretokenizers", json::array({split, byte_level})}};
}

BpeTrainer::BpeTrainer(BpeTrainerOptions options) : options_(std::move(options)) {}

Status BpeTrainer::CheckOptions() const {
  const int32_t base = static_cast<int32_t>(options_.special_tokens.size()) + 256;
  if (options_.vocab_size < base) {
    return Status::InvalidArgument("--vocab-size " + std::to_string(options_.vocab_size) + " is below the " +
                                   std::to_string(base) + " tokens every byte-level BPE vocabulary starts with (" +
                                   std::to_string(options_.special_tokens.size()) + " special + 256 bytes)");
  }
  for (size_t i = 0; i < options_.special_tokens.size(); ++i) {
    if (options_.special_tokens[i].empty()) return Status::InvalidArgument("--special: a special token cannot be empty");
    for (size_t k = 0; k < i; ++k)
      if (options_.special_tokens[k] == options_.special_tokens[i])
        return Status::InvalidArgument("--special " + options_.special_tokens[i] + " is given twice");
    LS_RETURN_IF_ERROR(ValidateUtf8(options_.special_tokens[i], "--special " + options_.special_tokens[i]));
  }
  return Status::Ok();
}

Status BpeTrainer::AddText(std::string_view text, const std::string& what, int64_t base) {
  LS_RETURN_IF_ERROR(ValidateUtf8(text, what, base));
  // Words are counted with the very pre-tokenizer the written tokenizer.json names.
  static const auto steps_of = [](PreTokenizerKind kind) {
    return Tokenizer::ReadPreTokenizer(PreTokenizerJson(kind), "the trainer").value();
  };
  static const std::vector<PreTokenizerStep> gpt2 = steps_of(PreTokenizerKind::kGpt2);
  static const std::vector<PreTokenizerStep> llama3 = steps_of(PreTokenizerKind::kLlama3);
  const auto& steps = options_.pre_tokenizer == PreTokenizerKind::kGpt2 ? gpt2 : llama3;
  // Line by line, each line with its '\n', as tokenizers' train(files) feeds its trainer (so a
  // run of blanks never joins across a line end); in slices of whole lines, in parallel.
  const int threads = std::max(1, options_.threads);
  std::vector<std::string_view> slices;
  const size_t target = std::max<size_t>(1 << 20, text.size() / threads + 1);
  for (size_t at = 0; at < text.size();) {
    size_t end = std::min(text.size(), at + target);
    if (end < text.size()) {
      const size_t nl = text.find('\n', end - 1);
      end = nl == std::string_view::npos ? text.size() : nl + 1;
    }
    slices.push_back(text.substr(at, end - at));
    at = end;
  }
  std::vector<std::unordered_map<std::string, int64_t>> partial(slices.size());
  auto count = [&](size_t s) {
    std::string_view slice = slices[s];
    for (size_t at = 0; at < slice.size();) {
      const size_t nl = slice.find('\n', at);
      const size_t end = nl == std::string_view::npos ? slice.size() : nl + 1;
      for (std::string& w : PreTokenize(steps, {std::string(slice.substr(at, end - at))})) ++partial[s][std::move(w)];
      at = end;
    }
  };
  std::vector<std::thread> pool;
  for (size_t s = 1; s < slices.size(); ++s) pool.emplace_back(count, s);
  if (!slices.empty()) count(0);
  for (auto& t : pool) t.join();
  for (auto& p : partial) {
    for (auto& [w, c] : p) {
      counts_[w] += c;
      words_seen_ += c;
    }
  }
  return Status::Ok();
}

Result<TrainedBpe> BpeTrainer::Train() const {
  LS_RETURN_IF_ERROR(CheckOptions());
  std::vector<std::string> id_to_token;
  std::unordered_map<std::string, int32_t> token_to_id;
  auto add = [&](const std::string& t) {
    auto [it, fresh] = token_to_id.emplace(t, static_cast<int32_t>(id_to_token.size()));
    if (fresh) id_to_token.push_back(t);
    return it->second;
  };
  for (const std::string& s : options_.special_tokens) add(s);
  // The alphabet: the 256 byte characters, in code point order (tokenizers sorts its alphabet
  // by char; every character a word holds is one of them).
  std::vector<std::string> alphabet;
  for (const std::string& c : ByteAlphabet()) alphabet.push_back(c);
  std::sort(alphabet.begin(), alphabet.end(), [](const std::string& a, const std::string& b) {
    size_t i = 0, j = 0;
    return NextCodePoint(a, &i) < NextCodePoint(b, &j);
  });
  for (const std::string& c : alphabet) add(c);

  // Words as symbol ids, in a fixed order (sorted by text) so that the result does not depend
  // on hash-map order.
  std::vector<std::pair<std::string, int64_t>> sorted(counts_.begin(), counts_.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::vector<int32_t>> words(sorted.size());
  std::vector<int64_t> counts(sorted.size());
  for (size_t w = 0; w < sorted.size(); ++w) {
    const std::string& text = sorted[w].first;
    counts[w] = sorted[w].second;
    for (size_t i = 0; i < text.size();) {
      const size_t start = i;
      i += Utf8Length(static_cast<unsigned char>(text[i]));
      words[w].push_back(token_to_id.at(text.substr(start, i - start)));
    }
  }
  // From here on a literal port of tokenizers' BpeTrainer::do_train, quirks included, so that
  // the same text gives the same merges: a queue entry carries the words where its pair was
  // (re)formed in one round; an entry whose count is out of date goes back with the current
  // count; a merged pair's own count is never reset (a pair formed again later comes back with
  // its old count added, and can be merged twice: the merge is then listed twice).
  std::unordered_map<Pair, int64_t, PairHash> pair_counts;
  std::unordered_map<Pair, std::vector<int32_t>, PairHash> where;
  for (size_t w = 0; w < words.size(); ++w) {
    for (size_t i = 0; i + 1 < words[w].size(); ++i) {
      const Pair p{words[w][i], words[w][i + 1]};
      pair_counts[p] += counts[w];
      std::vector<int32_t>& at = where[p];
      if (at.empty() || at.back() != static_cast<int32_t>(w)) at.push_back(static_cast<int32_t>(w));
    }
  }
  // Most frequent first; on equal counts the smaller pair of ids (tokenizers' Merge order).
  struct Entry {
    int64_t count;
    Pair pair;
    std::shared_ptr<std::vector<int32_t>> words;
    bool operator<(const Entry& o) const { return count != o.count ? count < o.count : pair > o.pair; }
  };
  std::priority_queue<Entry> queue;
  auto push_changed = [&]() {
    for (auto& [p, ws] : where) {
      const int64_t c = pair_counts[p];
      if (c > 0) queue.push({c, p, std::make_shared<std::vector<int32_t>>(std::move(ws))});
    }
    where.clear();
  };
  push_changed();

  json merges = json::array();
  while (static_cast<int32_t>(id_to_token.size()) < options_.vocab_size && !queue.empty()) {
    Entry top = queue.top();
    queue.pop();
    const int64_t now = pair_counts[top.pair];
    if (now != top.count) {
      top.count = now;
      queue.push(std::move(top));
      continue;
    }
    if (top.count < 1 || top.count < options_.min_frequency) break;
    const int32_t new_id = add(id_to_token[top.pair.first] + id_to_token[top.pair.second]);
    merges.push_back(id_to_token[top.pair.first] + " " + id_to_token[top.pair.second]);
    // tokenizers' Word::merge in each word of the entry: left to right, non-overlapping.
    for (int32_t w : *top.words) {
      std::vector<int32_t>& sym = words[w];
      const int64_t c = counts[w];
      auto change = [&](const Pair& p, int64_t delta) {
        pair_counts[p] += delta * c;
        if (delta > 0) {
          std::vector<int32_t>& at = where[p];
          if (at.empty() || at.back() != w) at.push_back(w);
        }
      };
      for (size_t i = 0; i + 1 < sym.size();) {
        if (sym[i] != top.pair.first || sym[i + 1] != top.pair.second) {
          ++i;
          continue;
        }
        if (i > 0) {
          change({sym[i - 1], sym[i]}, -1);
          change({sym[i - 1], new_id}, +1);
        }
        if (i + 2 < sym.size()) {
          change({sym[i + 1], sym[i + 2]}, -1);
          change({new_id, sym[i + 2]}, +1);
        }
        sym[i] = new_id;
        sym.erase(sym.begin() + static_cast<std::ptrdiff_t>(i) + 1);
        ++i;
      }
    }
    push_changed();
  }

  json vocab = json::object();
  for (size_t id = 0; id < id_to_token.size(); ++id) vocab[id_to_token[id]] = id;
  json added = json::array();
  for (size_t i = 0; i < options_.special_tokens.size(); ++i) {
    added.push_back({{"id", i}, {"content", options_.special_tokens[i]}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  }
  json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  TrainedBpe out;
  out.merges = static_cast<int64_t>(merges.size());
  for (size_t w = 0; w < words.size(); ++w) out.tokens += counts[w] * static_cast<int64_t>(words[w].size());
  out.tokenizer = json{{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens", added},
              {"normalizer", nullptr},
              {"pre_tokenizer", PreTokenizerJson(options_.pre_tokenizer)},
              {"post_processor", byte_level},
              {"decoder", byte_level},
              {"model",
               {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", false},
                {"vocab", vocab},
                {"merges", merges}}}};
  return out;
}

}  // namespace lockstep::text
