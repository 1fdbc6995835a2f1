// Pre-tokenizers of Hugging Face tokenizer.json files: each step cuts every piece of text into
// smaller pieces (BPE then merges inside a piece, never across). The kinds byte-level BPE
// tokenizers use: ByteLevel (GPT-2's regex, then every byte as its character), Split (a regex or
// a literal, with tokenizers' five delimiter behaviours and `invert`), Digits, and Sequence of
// these (flattened into the list of steps).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "lockstep/text/regex.h"

namespace lockstep::text {

// GPT-2's pattern, as ByteLevel's use_regex applies it.
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3's pattern (its tokenizer.json's Split, behaviour Isolated), also used by
// `lockstep tokenizer train --pre-tokenizer llama3`.
inline constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen2's: Llama 3's with single digits.
inline constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// What Split does with the pieces its pattern matches (tokenizers' SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct PreTokenizerStep {
  enum class Kind { kByteLevel, kSplit } kind = Kind::kSplit;
  // ByteLevel
  bool add_prefix_space = false;
  bool use_regex = true;
  // Split (Digits is a Split on \p{N}: Isolated for individual digits, else Contiguous)
  Regex pattern;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
};

// Runs the steps in order over `pieces` (each valid UTF-8). Empty pieces are dropped.
std::vector<std::string> PreTokenize(const std::vector<PreTokenizerStep>& steps, std::vector<std::string> pieces);

// The first place at or after `from` where text can be cut without changing its pieces under
// GPT-2's and Llama 3's patterns (and Digits): just after a '\n' that follows a printable ASCII
// character and precedes one (there neither pattern joins across, and a newline between two
// non-spaces is a piece of its own or ends one). text.size() when there is none. Only for
// steps that CutsAreSafe() approves.
size_t NextSafeCut(std::string_view text, size_t from);
// True when every Split of `steps` is one whose pieces NextSafeCut keeps: GPT-2's, Llama 3's,
// Qwen2's pattern or Digits (an unknown pattern might join pieces across a newline), and no
// ByteLevel adds a prefix space (it would go before each cut piece).
bool CutsAreSafe(const std::vector<PreTokenizerStep>& steps);

// One Split over one piece, appending the resulting pieces to `out`.
void SplitPiece(const PreTokenizerStep& step, const std::string& piece, std::vector<std::string>* out);

}  // namespace lockstep::text
