// GPT-2's byte-to-character table, which byte-level BPE tokenizers (GPT-2, Llama 3, SmolLM2,
// Qwen2) use so that every byte of the input is a printable character of the vocabulary: the
// bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for themselves; the other 68 bytes, in
// increasing order, become U+0100, U+0101, ... (so a space is 'Ġ' U+0120, a newline 'Ċ').
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace lockstep::text {

// The character that stands for byte b.
char32_t ByteToChar(unsigned char b);

// Every byte of `bytes` as its character, UTF-8 encoded (a 1-to-1 map: 256 characters).
std::string BytesToChars(std::string_view bytes);

// The inverse for one character: the byte it stands for, or -1 for a character outside the
// table (a decoder keeps such a character's own UTF-8 bytes).
int CharToByte(char32_t c);

// The ByteLevel decoder for one token: each character back to its byte; a token holding any
// character outside the table (an added token such as "<|endoftext|>" has none) is kept as its
// own UTF-8 bytes, as tokenizers' decoder does.
void AppendCharsAsBytes(std::string_view token, std::string* out);

// The 256 characters of the table, UTF-8 encoded, in byte order (the trainer's initial
// alphabet: every byte is a token, so no input is ever unknown).
std::array<std::string, 256> ByteAlphabet();

}  // namespace lockstep::text
