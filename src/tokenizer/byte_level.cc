#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace folio {
namespace {

struct Tables {
  std::array<std::string, 256> byte_to_char;
  std::array<int16_t, 0x144> char_to_byte;  // code point -> byte, -1 if not in the alphabet

  Tables() {
    char_to_byte.fill(-1);
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      char32_t cp = printable(b) ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + next++);
      append_codepoint(byte_to_char[b], cp);
      char_to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

std::string_view byte_level_char(uint8_t b) { return tables().byte_to_char[b]; }

std::optional<std::string> byte_level_to_bytes(std::string_view token) {
  const Tables& t = tables();
  std::string out;
  out.reserve(token.size());
  size_t pos = 0;
  while (pos < token.size()) {
    char32_t cp = next_codepoint(token, pos);
    if (cp >= t.char_to_byte.size() || t.char_to_byte[cp] < 0) return std::nullopt;
    out.push_back(static_cast<char>(t.char_to_byte[cp]));
  }
  return out;
}

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out.append(byte_level_char(static_cast<uint8_t>(c)));
  return out;
}

}  // namespace folio
