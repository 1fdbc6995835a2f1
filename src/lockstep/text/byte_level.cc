#include "lockstep/text/byte_level.h"

#include "lockstep/text/utf8.h"

namespace lockstep::text {
namespace {

struct Tables {
  std::array<char32_t, 256> to_char{};
  std::array<std::string, 256> utf8;
  std::array<int, 256 + 68> from_char{};  // every character of the table is below U+0144
  Tables() {
    from_char.fill(-1);
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const bool self = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_char[b] = self ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + next++);
      AppendUtf8(to_char[b], &utf8[b]);
      from_char[to_char[b]] = b;
    }
  }
};

const Tables& T() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t ByteToChar(unsigned char b) { return T().to_char[b]; }

std::string BytesToChars(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  const Tables& t = T();
  for (char c : bytes) out.append(t.utf8[static_cast<unsigned char>(c)]);
  return out;
}

int CharToByte(char32_t c) {
  return c < 256 + 68 ? T().from_char[c] : -1;
}

void AppendCharsAsBytes(std::string_view token, std::string* out) {
  // All or nothing, per token (tokenizers' ByteLevel decode_chain): a token with a character
  // outside the table keeps its own UTF-8 bytes whole.
  const size_t mark = out->size();
  for (size_t i = 0; i < token.size();) {
    const int b = CharToByte(NextCodePoint(token, &i));
    if (b < 0) {
      out->resize(mark);
      out->append(token);
      return;
    }
    out->push_back(static_cast<char>(b));
  }
}

std::array<std::string, 256> ByteAlphabet() { return T().utf8; }

}  // namespace lockstep::text
