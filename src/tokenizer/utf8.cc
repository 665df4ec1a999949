#include "tokenizer/utf8.h"

namespace folio {
namespace {

// For a lead byte: the number of continuation bytes it needs and the allowed range of the first
// continuation byte (Unicode Table 3-7, which excludes overlongs and surrogates).
struct LeadInfo {
  int needed;
  uint8_t lo, hi;
};

LeadInfo lead_info(uint8_t b) {
  if (b >= 0xC2 && b <= 0xDF) return {1, 0x80, 0xBF};
  if (b == 0xE0) return {2, 0xA0, 0xBF};
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return {2, 0x80, 0xBF};
  if (b == 0xED) return {2, 0x80, 0x9F};
  if (b == 0xF0) return {3, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {3, 0x80, 0xBF};
  if (b == 0xF4) return {3, 0x80, 0x8F};
  return {-1, 0, 0};
}

// Length of the longest prefix of the sequence at `pos` that is still well-formed (1 for a
// lone invalid byte), and whether it is a complete character.
size_t scan_char(std::string_view s, size_t pos, bool& complete) {
  uint8_t b = static_cast<uint8_t>(s[pos]);
  complete = false;
  if (b < 0x80) {
    complete = true;
    return 1;
  }
  LeadInfo info = lead_info(b);
  if (info.needed < 0) return 1;
  size_t len = 1;
  for (int k = 0; k < info.needed; ++k) {
    if (pos + len >= s.size()) return len;  // truncated
    uint8_t c = static_cast<uint8_t>(s[pos + len]);
    uint8_t lo = k == 0 ? info.lo : 0x80, hi = k == 0 ? info.hi : 0xBF;
    if (c < lo || c > hi) return len;  // broken: the maximal subpart ends here
    ++len;
  }
  complete = true;
  return len;
}

}  // namespace

size_t utf8_valid_char_len(std::string_view s, size_t pos) {
  bool complete = false;
  size_t len = scan_char(s, pos, complete);
  return complete ? len : 0;
}

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // Fast path over ASCII runs.
    while (i < s.size() && static_cast<uint8_t>(s[i]) < 0x80) ++i;
    if (i == s.size()) break;
    size_t len = utf8_valid_char_len(s, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

void append_utf8_lossy(std::string& out, std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    size_t start = i;
    while (i < bytes.size() && static_cast<uint8_t>(bytes[i]) < 0x80) ++i;
    out.append(bytes.substr(start, i - start));
    if (i == bytes.size()) break;
    bool complete = false;
    size_t len = scan_char(bytes, i, complete);
    if (complete) {
      out.append(bytes.substr(i, len));
    } else {
      out.append(kReplacementChar);
    }
    i += len;
  }
}

size_t incomplete_utf8_tail(std::string_view s) {
  // A proper prefix of a character has at most 3 bytes, so only look that far back.
  size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    size_t pos = n - back;
    uint8_t b = static_cast<uint8_t>(s[pos]);
    if (b >= 0x80 && b <= 0xBF) continue;  // a continuation byte: look further back
    bool complete = false;
    size_t len = scan_char(s, pos, complete);
    // Incomplete only if the scan ran into the end of the string while still well-formed.
    return (!complete && pos + len == n && lead_info(b).needed > 0) ? back : 0;
  }
  return 0;
}

void append_codepoint(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

char32_t next_codepoint(std::string_view s, size_t& pos) {
  uint8_t b = static_cast<uint8_t>(s[pos]);
  if (b < 0x80) {
    ++pos;
    return b;
  }
  int extra = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : 1;
  char32_t cp = b & (0x3F >> extra);
  ++pos;
  for (int k = 0; k < extra && pos < s.size(); ++k, ++pos) {
    cp = (cp << 6) | (static_cast<uint8_t>(s[pos]) & 0x3F);
  }
  return cp;
}

}  // namespace folio
