// UTF-8 helpers shared by the tokenizer: validation, lossy conversion with the exact replacement
// rules of Rust's String::from_utf8_lossy (one U+FFFD per maximal invalid subpart, as HF
// `tokenizers` produces), detection of an incomplete trailing sequence (what a streaming decoder
// must hold back), and code point encoding. Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace folio {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Length of the well-formed UTF-8 sequence starting at `s[pos]`, or 0 if the bytes there do not
// form a complete, well-formed character (invalid lead, bad continuation, or truncated).
size_t utf8_valid_char_len(std::string_view s, size_t pos);

bool is_valid_utf8(std::string_view s);

// Appends `bytes` to `out`, replacing each maximal invalid subpart with U+FFFD (a truncated
// sequence at the very end also becomes one U+FFFD).
void append_utf8_lossy(std::string& out, std::string_view bytes);
inline std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  append_utf8_lossy(out, bytes);
  return out;
}

// Number of trailing bytes of `s` that form a proper prefix of a well-formed character (0..3):
// more bytes could still complete it. Bytes before that point decode the same whatever follows.
size_t incomplete_utf8_tail(std::string_view s);

void append_codepoint(std::string& out, char32_t cp);

// Decodes the code point at `s[pos]` of a valid UTF-8 string and advances `pos`.
char32_t next_codepoint(std::string_view s, size_t& pos);

}  // namespace folio
