#include "lockstep/text/tokenizer.h"

#include <algorithm>
#include <fstream>
#include <queue>
#include <sstream>

#include <nlohmann/json.hpp>

#include "lockstep/text/byte_level.h"
#include "lockstep/text/utf8.h"

namespace lockstep::text {
namespace {

using nlohmann::json;

Status Bad(const std::string& origin, const std::string& what) {
  return Status::InvalidArgument(origin + ": " + what);
}

std::string TypeOf(const json& j) { return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : ""; }

bool Flag(const json& j, const char* key, bool fallback) {
  return j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : fallback;
}

// One pre-tokenizer of the JSON (a Sequence flattened) as steps.
Status AddPreTokenizer(const json& j, const std::string& origin, std::vector<PreTokenizerStep>* steps) {
  if (j.is_null()) return Status::Ok();
  const std::string type = TypeOf(j);
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array()) return Bad(origin, "pre_tokenizer Sequence without a pretokenizers list");
    for (const json& p : j["pretokenizers"]) LS_RETURN_IF_ERROR(AddPreTokenizer(p, origin, steps));
    return Status::Ok();
  }
  PreTokenizerStep step;
  if (type == "ByteLevel") {
    step.kind = PreTokenizerStep::Kind::kByteLevel;
    step.add_prefix_space = Flag(j, "add_prefix_space", true);
    step.use_regex = Flag(j, "use_regex", true);
  } else if (type == "Digits") {
    LS_ASSIGN_OR_RETURN(step.pattern, Regex::Compile(R"(\p{N})"));
    step.behavior = Flag(j, "individual_digits", false) ? SplitBehavior::kIsolated : SplitBehavior::kContiguous;
  } else if (type == "Split") {
    const json& p = j.contains("pattern") ? j["pattern"] : json();
    std::string regex;
    if (p.is_object() && p.contains("Regex") && p["Regex"].is_string()) {
      regex = p["Regex"].get<std::string>();
    } else if (p.is_object() && p.contains("String") && p["String"].is_string()) {
      // A literal: every regex metacharacter quoted.
      for (char c : p["String"].get<std::string>()) {
        if (std::string_view(R"(\^$.|?*+()[]{}-)").find(c) != std::string_view::npos) regex.push_back('\\');
        regex.push_back(c);
      }
      if (regex.empty()) return Bad(origin, "pre_tokenizer Split with an empty String pattern");
    } else {
      return Bad(origin, "pre_tokenizer Split needs pattern {\"Regex\": ...} or {\"String\": ...}");
    }
    auto re = Regex::Compile(regex);
    if (!re.ok()) return Bad(origin, "pre_tokenizer Split: " + re.status().message());
    step.pattern = *std::move(re);
    const std::string b = j.value("behavior", std::string("Isolated"));
    if (b == "Removed") step.behavior = SplitBehavior::kRemoved;
    else if (b == "Isolated") step.behavior = SplitBehavior::kIsolated;
    else if (b == "MergedWithPrevious") step.behavior = SplitBehavior::kMergedWithPrevious;
    else if (b == "MergedWithNext") step.behavior = SplitBehavior::kMergedWithNext;
    else if (b == "Contiguous") step.behavior = SplitBehavior::kContiguous;
    else return Bad(origin, "pre_tokenizer Split behavior " + b + " is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous");
    step.invert = Flag(j, "invert", false);
  } else {
    return Bad(origin, "pre_tokenizer " + (type.empty() ? std::string("without a type") : type) +
                           " is not supported (lockstep reads byte-level BPE tokenizers: ByteLevel, Split, Digits, Sequence)");
  }
  steps->push_back(std::move(step));
  return Status::Ok();
}

// Whether the one character `c` matches `re` (a pattern anchored at both ends).
bool CharMatches(const Regex& re, char32_t c) {
  std::string s;
  AppendUtf8(c, &s);
  bool hit = false;
  re.ForEachMatch(s, [&](size_t, size_t) { hit = true; });
  return hit;
}
// \w and \s over Unicode, as single_word and lstrip/rstrip test them in tokenizers.
bool IsWordChar(char32_t c) {
  static const Regex* word = new Regex(Regex::Compile(R"(\A[\p{L}\p{N}_]\z)").value());
  return CharMatches(*word, c);
}
bool IsSpace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= '\t' && c <= '\r');
  static const Regex* space = new Regex(Regex::Compile(R"(\A\s\z)").value());
  return CharMatches(*space, c);
}
// The code point that ends s[0, end) (valid UTF-8, end > 0).
char32_t LastCodePoint(std::string_view s, size_t end, size_t* start) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  *start = i;
  size_t k = i;
  return NextCodePoint(s, &k);
}

}  // namespace

Result<std::vector<PreTokenizerStep>> Tokenizer::ReadPreTokenizer(const json& j, const std::string& origin) {
  std::vector<PreTokenizerStep> steps;
  LS_RETURN_IF_ERROR(AddPreTokenizer(j, origin, &steps));
  return steps;
}

Result<Tokenizer> Tokenizer::FromFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("tokenizer " + path + ": cannot open it");
  std::stringstream buf;
  buf << in.rdbuf();
  json j = json::parse(buf.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("tokenizer " + path + ": not valid JSON");
  return FromJson(j, "tokenizer " + path);
}

Result<Tokenizer> Tokenizer::FromJson(const json& j, const std::string& origin) {
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) return Bad(origin, "no \"model\" object (not a tokenizer.json)");
  const json& m = j["model"];
  std::string type = TypeOf(m);
  if (type.empty()) type = m.contains("merges") ? "BPE" : "untyped";
  if (type != "BPE") return Bad(origin, "model type " + type + " is not supported (lockstep reads byte-level BPE tokenizers)");
  if (!m.contains("vocab") || !m["vocab"].is_object()) return Bad(origin, "model.vocab is not an object of token: id");
  if (m.contains("dropout") && m["dropout"].is_number() && m["dropout"].get<double>() > 0)
    return Bad(origin, "model.dropout (BPE dropout) is not supported");
  if (Flag(m, "byte_fallback", false)) return Bad(origin, "model.byte_fallback is not supported (a byte-level vocabulary needs none)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (m.contains(key) && m[key].is_string() && !m[key].get<std::string>().empty())
      return Bad(origin, std::string("model.") + key + " is not supported");
  }
  if (j.contains("normalizer") && !j["normalizer"].is_null()) {
    const json& n = j["normalizer"];
    const bool empty_sequence = TypeOf(n) == "Sequence" && n.contains("normalizers") && n["normalizers"].empty();
    if (!empty_sequence) return Bad(origin, "normalizer " + TypeOf(n) + " is not supported (lockstep applies none)");
  }
  if (j.contains("decoder") && !j["decoder"].is_null() && TypeOf(j["decoder"]) != "ByteLevel")
    return Bad(origin, "decoder " + TypeOf(j["decoder"]) + " is not supported (byte-level BPE decodes with ByteLevel)");

  Tokenizer t;
  int64_t max_id = -1;
  for (const auto& [token, id] : m["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= (int64_t{1} << 31))
      return Bad(origin, "model.vocab[" + token + "] is not a non-negative id");
    max_id = std::max(max_id, id.get<int64_t>());
  }
  std::vector<AddedToken> added;
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (const json& a : j["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") || !a["content"].is_string())
        return Bad(origin, "an added_tokens entry without an integer id and a content string");
      AddedToken at;
      at.id = a["id"].get<int32_t>();  // checked against tokenizers' numbering below
      at.content = a["content"].get<std::string>();
      at.special = Flag(a, "special", false);
      at.single_word = Flag(a, "single_word", false);
      at.lstrip = Flag(a, "lstrip", false);
      at.rstrip = Flag(a, "rstrip", false);
      at.normalized = Flag(a, "normalized", !at.special);
      if (at.id < 0 || at.content.empty()) return Bad(origin, "added token " + at.content + " has a negative id or no content");
      max_id = std::max<int64_t>(max_id, at.id);
      added.push_back(std::move(at));
    }
  }
  // tokenizers ignores an added token's "id": a content in model.vocab keeps that id, the
  // others are numbered from the vocabulary's size on, in the list's order. A file whose ids say
  // otherwise would encode differently there: refused.
  {
    const int64_t vocab_entries = static_cast<int64_t>(m["vocab"].size());
    int64_t max_added = -1;
    for (const AddedToken& a : added) {
      int64_t expect = max_added >= vocab_entries ? max_added + 1 : vocab_entries;
      if (m["vocab"].contains(a.content)) expect = m["vocab"][a.content].get<int64_t>();
      if (a.id != expect) {
        return Bad(origin, "added token " + a.content + " has id " + std::to_string(a.id) +
                               " where Hugging Face's tokenizers numbers it " + std::to_string(expect));
      }
      max_added = std::max(max_added, expect);
    }
  }
  if (max_id < 0) return Bad(origin, "the vocabulary is empty");
  t.id_to_token_.assign(max_id + 1, std::string());
  for (const auto& [token, id] : m["vocab"].items()) {
    t.id_to_token_[id.get<int32_t>()] = token;
    t.token_to_id_[token] = id.get<int32_t>();
  }
  for (const AddedToken& a : added) {
    t.id_to_token_[a.id] = a.content;
    t.token_to_id_.emplace(a.content, a.id);
  }
  t.added_ = std::move(added);
  for (size_t i = 0; i < t.added_.size(); ++i) (t.added_[i].normalized ? t.added_normalized_ : t.added_unnormalized_).push_back(static_cast<int>(i));
  for (const char* eot : {"<|endoftext|>", "<|end_of_text|>", "</s>", "<|im_end|>", "<eos>"}) {
    if (t.end_of_text_) break;
    for (const AddedToken& a : t.added_) {
      if (a.special && a.content == eot) {
        t.end_of_text_ = a.id;
        break;
      }
    }
  }
  if (m.contains("unk_token") && m["unk_token"].is_string()) {
    auto unk = t.TokenToId(m["unk_token"].get<std::string>());
    if (!unk) return Bad(origin, "model.unk_token " + m["unk_token"].get<std::string>() + " is not in the vocabulary");
    t.unk_ = *unk;
  }
  t.ignore_merges_ = Flag(m, "ignore_merges", false);

  if (!m.contains("merges") || !m["merges"].is_array()) return Bad(origin, "model.merges is not a list");
  int32_t rank = 0;
  for (const json& mg : m["merges"]) {
    std::string a, b;
    if (mg.is_string()) {
      const std::string s = mg.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        return Bad(origin, "merge " + std::to_string(rank) + " (\"" + s + "\") is not two tokens separated by one space");
      a = s.substr(0, sp), b = s.substr(sp + 1);
    } else if (mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string()) {
      a = mg[0].get<std::string>(), b = mg[1].get<std::string>();
    } else {
      return Bad(origin, "merge " + std::to_string(rank) + " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    auto ia = t.token_to_id_.find(a), ib = t.token_to_id_.find(b), ic = t.token_to_id_.find(a + b);
    if (ia == t.token_to_id_.end() || ib == t.token_to_id_.end() || ic == t.token_to_id_.end())
      return Bad(origin, "merge " + std::to_string(rank) + " (" + a + " " + b + ") names a token that is not in the vocabulary");
    // A pair listed twice: the later rank wins, as in tokenizers (its merges map is collected
    // from the list in order).
    t.merges_.insert_or_assign(PairKey(ia->second, ib->second), Merge{rank, ic->second});
    ++rank;
  }

  if (j.contains("pre_tokenizer")) {
    LS_ASSIGN_OR_RETURN(t.steps_, ReadPreTokenizer(j["pre_tokenizer"], origin));
  }
  const bool byte_level = std::any_of(t.steps_.begin(), t.steps_.end(),
                                      [](const PreTokenizerStep& s) { return s.kind == PreTokenizerStep::Kind::kByteLevel; });
  if (!byte_level) return Bad(origin, "pre_tokenizer has no ByteLevel step (lockstep reads byte-level BPE tokenizers)");
  t.cuts_are_safe_ = CutsAreSafe(t.steps_);
  for (const AddedToken& a : t.added_) t.added_newline_ = t.added_newline_ || a.content.find('\n') != std::string::npos;
  return t;
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  auto it = token_to_id_.find(std::string(token));
  if (it == token_to_id_.end()) return std::nullopt;
  return it->second;
}

void Tokenizer::SplitWith(std::string_view text, const std::vector<int>& which, size_t start, size_t end,
                          std::vector<Span>* out) const {
  // Leftmost-longest matching of the added tokens' contents (tokenizers' Aho-Corasick with
  // MatchKind::LeftmostLongest): the earliest start wins, then the longest content.
  size_t offset = start;  // where the pending text begins
  size_t at = start;
  while (at < end && !which.empty()) {
    int best = -1;
    size_t best_len = 0;
    for (int k : which) {
      const std::string& c = added_[k].content;
      if (c.size() > best_len && c.size() <= end - at && text.compare(at, c.size(), c) == 0) {
        best = k;
        best_len = c.size();
      }
    }
    if (best < 0) {
      ++at;
      continue;
    }
    const AddedToken& a = added_[best];
    size_t s = at, e = at + best_len;
    if (a.single_word) {
      size_t cp_start;
      const bool start_ok = s == start || !IsWordChar(LastCodePoint(text, s, &cp_start));
      size_t k = e;
      const bool end_ok = e == end || !IsWordChar(NextCodePoint(text, &k));
      if (!start_ok || !end_ok) {
        at = e;  // the matcher goes on after the rejected match: nothing inside it is tried
        continue;
      }
    }
    if (a.lstrip) {
      size_t cp_start = s;
      while (cp_start > offset) {
        size_t prev;
        if (!IsSpace(LastCodePoint(text, cp_start, &prev))) break;
        cp_start = prev;
      }
      s = cp_start;
    }
    if (a.rstrip) {
      while (e < end) {
        size_t k = e;
        if (!IsSpace(NextCodePoint(text, &k))) break;
        e = k;
      }
    }
    if (s > offset) out->push_back({offset, s, -1});
    out->push_back({s, e, a.id});
    offset = at = e;
  }
  if (end > offset) out->push_back({offset, end, -1});
}

std::vector<Tokenizer::Span> Tokenizer::SplitAddedTokens(std::string_view text) const {
  // Tokens that skip normalization are split out first; then, in what remains (normalized, a
  // no-op here), the others: the order of tokenizers' AddedVocabulary::extract_and_normalize.
  std::vector<Span> first, spans;
  SplitWith(text, added_unnormalized_, 0, text.size(), &first);
  for (const Span& s : first) {
    if (s.id >= 0) spans.push_back(s);
    else SplitWith(text, added_normalized_, s.start, s.end, &spans);
  }
  return spans;
}

void Tokenizer::EncodePiece(std::string_view piece, std::vector<int32_t>* out) const {
  if (ignore_merges_) {
    auto it = token_to_id_.find(std::string(piece));
    if (it != token_to_id_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool gone;
  };
  std::vector<Symbol> sym;
  sym.reserve(piece.size());
  for (size_t i = 0; i < piece.size();) {
    const size_t start = i;
    i += Utf8Length(static_cast<unsigned char>(piece[i]));
    auto it = token_to_id_.find(std::string(piece.substr(start, i - start)));
    int32_t id;
    if (it != token_to_id_.end()) id = it->second;
    else if (unk_) id = *unk_;
    else continue;  // no unk_token: an unknown character is dropped, as tokenizers does
    sym.push_back({id, static_cast<int32_t>(sym.size()) - 1, static_cast<int32_t>(sym.size()) + 1, false});
  }
  if (sym.empty()) return;
  sym.back().next = -1;
  // Lowest rank first, then leftmost (tokenizers' Word::merge_all).
  struct Candidate {
    int32_t rank, pos, new_id;
    bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate> queue;
  auto consider = [&](int32_t pos) {
    if (pos < 0 || sym[pos].next < 0) return;
    auto it = merges_.find(PairKey(sym[pos].id, sym[sym[pos].next].id));
    if (it != merges_.end()) queue.push({it->second.rank, pos, it->second.new_id});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) consider(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = sym[c.pos];
    if (left.gone || left.next < 0) continue;
    auto it = merges_.find(PairKey(left.id, sym[left.next].id));
    if (it == merges_.end() || it->second.new_id != c.new_id) continue;  // stale
    Symbol& right = sym[left.next];
    left.id = c.new_id;
    right.gone = true;
    left.next = right.next;
    if (left.next >= 0) sym[left.next].prev = c.pos;
    consider(left.prev);
    consider(c.pos);
  }
  for (const Symbol& s : sym)
    if (!s.gone) out->push_back(s.id);
}

template <typename PieceFn>
Status Tokenizer::EncodeWith(std::string_view text, std::vector<int32_t>* out, PieceFn&& piece) const {
  LS_RETURN_IF_ERROR(ValidateUtf8(text, "the text"));
  for (const Span& s : SplitAddedTokens(text)) {
    if (s.id >= 0) {
      out->push_back(s.id);
      continue;
    }
    // Line by line where that changes no piece: short piece lists, whatever the text's size.
    const std::string_view part = text.substr(s.start, s.end - s.start);
    for (size_t at = 0; at < part.size();) {
      const size_t end = cuts_are_safe_ ? NextSafeCut(part, at + 1) : part.size();
      for (const std::string& p : PreTokenize(steps_, {std::string(part.substr(at, end - at))})) piece(p, out);
      at = end;
    }
  }
  return Status::Ok();
}

Result<std::vector<int32_t>> Tokenizer::Encode(std::string_view text) const {
  std::vector<int32_t> ids;
  LS_RETURN_IF_ERROR(EncodeWith(text, &ids, [&](const std::string& p, std::vector<int32_t>* out) { EncodePiece(p, out); }));
  return ids;
}

Status Tokenizer::Encoder::Append(std::string_view text, std::vector<int32_t>* out) {
  return t_.EncodeWith(text, out, [&](const std::string& p, std::vector<int32_t>* o) {
    auto it = cache_.find(p);
    if (it == cache_.end()) {
      if (cache_.size() >= (1u << 20)) cache_.clear();  // bound the memory on endless new words
      std::vector<int32_t> ids;
      t_.EncodePiece(p, &ids);
      it = cache_.emplace(p, std::move(ids)).first;
    }
    o->insert(o->end(), it->second.begin(), it->second.end());
  });
}

Result<std::vector<int32_t>> Tokenizer::Encoder::Encode(std::string_view text) {
  std::vector<int32_t> ids;
  LS_RETURN_IF_ERROR(Append(text, &ids));
  return ids;
}

Result<std::string> Tokenizer::Decode(std::span<const int32_t> ids) const {
  std::string bytes;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= vocab_size() || id_to_token_[id].empty())
      return Status::InvalidArgument("token id " + std::to_string(id) + " (position " + std::to_string(i) +
                                     ") is not in the vocabulary of " + std::to_string(vocab_size()) + " ids");
    AppendCharsAsBytes(id_to_token_[id], &bytes);
  }
  return Utf8Lossy(bytes);
}

}  // namespace lockstep::text
