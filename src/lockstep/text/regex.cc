#include "lockstep/text/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "lockstep/text/utf8.h"

namespace lockstep::text {

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

Result<Regex> Regex::Compile(const std::string& pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    return Status::InvalidArgument("pattern " + pattern + " does not compile at offset " + std::to_string(offset) +
                                   ": " + reinterpret_cast<const char*>(message));
  }
  Regex r;
  r.code_ = std::make_shared<Code>();
  r.code_->code = code;
  r.code_->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  r.pattern_ = pattern;
  return r;
}

void Regex::ForEachMatch(std::string_view s, const std::function<void(size_t, size_t)>& on_match) const {
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_->code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t at = 0;
  while (at <= s.size()) {
    // The text was validated once by the caller: no per-call UTF check (it is O(n) each time).
    const int rc = code_->jit ? pcre2_jit_match(code_->code, subject, s.size(), at, PCRE2_NO_UTF_CHECK, md, nullptr)
                              : pcre2_match(code_->code, subject, s.size(), at, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc < 0) break;  // PCRE2_ERROR_NOMATCH, or a resource limit: no further matches
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t start = ov[0], end = ov[1];
    if (end > start) {
      on_match(start, end);
      at = end;
    } else {
      // An empty match is no piece; step over one character.
      if (start >= s.size()) break;
      at = start + Utf8Length(static_cast<unsigned char>(s[start]));
    }
  }
  pcre2_match_data_free(md);
}

}  // namespace lockstep::text
