// UTF-8 helpers for the tokenizer: validation that names the first bad byte, and code point
// iteration over text already known to be valid.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "lockstep/core/status.h"

namespace lockstep::text {

// OK when `s` is well-formed UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF);
// else InvalidArgument "<what> is not valid UTF-8 at byte offset N" (N counted from `base`:
// where `s` starts in a larger file).
Status ValidateUtf8(std::string_view s, std::string_view what, int64_t base = 0);

// The byte length of the UTF-8 sequence that starts with `lead` (1 for anything that is not a
// valid lead byte, so that a walk over invalid text still advances).
inline int Utf8Length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  if ((lead >> 3) == 0x1E) return 4;
  return 1;
}

// Decodes the code point at s[i] (valid UTF-8) and advances i past it.
char32_t NextCodePoint(std::string_view s, size_t* i);

// Appends the UTF-8 encoding of `c`.
void AppendUtf8(char32_t c, std::string* out);

// `s` with every invalid sequence replaced by U+FFFD, as Rust's String::from_utf8_lossy
// (the ByteLevel decoder's last step): each maximal invalid prefix becomes one U+FFFD.
std::string Utf8Lossy(std::string_view s);

}  // namespace lockstep::text
