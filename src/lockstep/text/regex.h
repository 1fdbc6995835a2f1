// A compiled PCRE2 pattern (UTF + Unicode properties, JIT when available) for the
// pre-tokenizers. Hugging Face's `tokenizers` uses Oniguruma; both give \p{L}, \p{N}, \s over
// Unicode and lookahead, which is what its tokenizer.json patterns need (std::regex has none).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "lockstep/core/result.h"

namespace lockstep::text {

class Regex {
 public:
  // InvalidArgument naming the pattern and PCRE2's message when it does not compile.
  static Result<Regex> Compile(const std::string& pattern);

  // Calls on_match(start, end) for each successive non-overlapping match of `s` (valid UTF-8),
  // left to right; an empty match advances by one character, as Rust's find_iter does.
  // Thread-safe: each call has its own match data.
  void ForEachMatch(std::string_view s, const std::function<void(size_t, size_t)>& on_match) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  std::shared_ptr<Code> code_;
  std::string pattern_;
};

}  // namespace lockstep::text
