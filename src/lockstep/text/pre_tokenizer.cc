#include "lockstep/text/pre_tokenizer.h"

#include <utility>

#include "lockstep/text/byte_level.h"

namespace lockstep::text {
namespace {

struct Segment {
  size_t start, end;
  bool is_match;
};

// The piece as alternating gaps and matches, covering it whole (tokenizers' find_matches).
std::vector<Segment> Segments(const Regex& re, const std::string& piece, bool invert) {
  std::vector<Segment> segs;
  size_t prev = 0;
  re.ForEachMatch(piece, [&](size_t s, size_t e) {
    if (s > prev) segs.push_back({prev, s, invert});
    segs.push_back({s, e, !invert});
    prev = e;
  });
  if (prev < piece.size()) segs.push_back({prev, piece.size(), invert});
  return segs;
}

// tokenizers' NormalizedString::split: how matches join their neighbours.
std::vector<Segment> ApplyBehavior(std::vector<Segment> segs, SplitBehavior behavior) {
  std::vector<Segment> acc;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      return segs;
    case SplitBehavior::kRemoved:
      for (const Segment& s : segs)
        if (!s.is_match) acc.push_back(s);
      return acc;
    case SplitBehavior::kMergedWithPrevious:
      for (const Segment& s : segs) {
        if (s.is_match && !previous_match && !acc.empty()) acc.back().end = s.end;
        else acc.push_back(s);
        previous_match = s.is_match;
      }
      return acc;
    case SplitBehavior::kMergedWithNext:
      for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
        if (it->is_match && !previous_match && !acc.empty()) acc.back().start = it->start;
        else acc.push_back(*it);
        previous_match = it->is_match;
      }
      return {acc.rbegin(), acc.rend()};
    case SplitBehavior::kContiguous:
      for (const Segment& s : segs) {
        if (s.is_match == previous_match && !acc.empty()) acc.back().end = s.end;
        else acc.push_back(s);
        previous_match = s.is_match;
      }
      return acc;
  }
  return segs;
}

bool Graphic(char c) { return c > ' ' && c < 0x7F; }

}  // namespace

size_t NextSafeCut(std::string_view text, size_t from) {
  for (size_t nl = text.find('\n', from); nl != std::string_view::npos; nl = text.find('\n', nl + 1)) {
    if (nl >= 1 && nl + 1 < text.size() && nl + 1 >= from && Graphic(text[nl - 1]) && Graphic(text[nl + 1])) return nl + 1;
  }
  return text.size();
}

bool CutsAreSafe(const std::vector<PreTokenizerStep>& steps) {
  for (const PreTokenizerStep& s : steps) {
    // A prefix space goes before every piece a step receives: cut pieces would get more.
    if (s.kind == PreTokenizerStep::Kind::kByteLevel && s.add_prefix_space) return false;
    if (s.kind != PreTokenizerStep::Kind::kSplit) continue;
    const std::string& p = s.pattern.pattern();
    const bool known = p == kGpt2Pattern || p == kLlama3Pattern || p == kQwen2Pattern || p == R"(\p{N})";
    if (!known || s.invert || s.behavior == SplitBehavior::kRemoved) return false;
  }
  return true;
}

void SplitPiece(const PreTokenizerStep& step, const std::string& piece, std::vector<std::string>* out) {
  for (const Segment& s : ApplyBehavior(Segments(step.pattern, piece, step.invert), step.behavior)) {
    if (s.end > s.start) out->push_back(piece.substr(s.start, s.end - s.start));
  }
}

std::vector<std::string> PreTokenize(const std::vector<PreTokenizerStep>& steps, std::vector<std::string> pieces) {
  // ByteLevel's use_regex is a Split on GPT-2's pattern, Isolated: built once.
  static const PreTokenizerStep* gpt2_split = [] {
    auto* step = new PreTokenizerStep;
    step->pattern = Regex::Compile(kGpt2Pattern).value();
    return step;
  }();
  std::vector<std::string> next;
  for (const PreTokenizerStep& step : steps) {
    next.clear();
    for (std::string& piece : pieces) {
      if (step.kind == PreTokenizerStep::Kind::kSplit) {
        SplitPiece(step, piece, &next);
        continue;
      }
      // ByteLevel: a space before a piece that does not start with one, GPT-2's split, then
      // every byte as its character.
      if (step.add_prefix_space && (piece.empty() || piece[0] != ' ')) piece.insert(piece.begin(), ' ');
      if (step.use_regex) {
        const size_t first = next.size();
        SplitPiece(*gpt2_split, piece, &next);
        for (size_t i = first; i < next.size(); ++i) next[i] = BytesToChars(next[i]);
      } else if (!piece.empty()) {
        next.push_back(BytesToChars(piece));
      }
    }
    std::swap(pieces, next);
  }
  return pieces;
}

}  // namespace lockstep::text
