#include "tokenizer/jinja_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include <utf8proc.h>

#include "tokenizer/jinja_error.h"

namespace folio::jinja {
namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 if invalid.
size_t sequence_length(std::string_view s, size_t i) {
  auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
  if (n == 0 || c > 0xF4 || i + n > s.size()) return 0;
  utf8proc_int32_t cp = 0;
  auto got = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                              static_cast<utf8proc_ssize_t>(n), &cp);
  return got == static_cast<utf8proc_ssize_t>(n) ? n : 0;
}

bool is_cased(char32_t cp) {
  if (cp >= 0xDC00 && cp <= 0xDCFF) return false;
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL ||
         cat == UTF8PROC_CATEGORY_LT;
}

char32_t to_upper_cp(char32_t cp) {
  if (cp >= 0xDC00 && cp <= 0xDCFF) return cp;
  return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(cp)));
}
char32_t to_lower_cp(char32_t cp) {
  if (cp >= 0xDC00 && cp <= 0xDCFF) return cp;
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)));
}

char32_t to_title_cp(char32_t cp) {
  if (cp >= 0xDC00 && cp <= 0xDCFF) return cp;
  return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(cp)));
}

// Python applies SpecialCasing.txt's unconditional full mappings; these are the common ones
// (utf8proc only has the one-to-one mappings).
bool append_special(std::string& out, char32_t cp, char mode) {
  const char* s = nullptr;
  if (cp == 0xDF) s = mode == 'u' ? "SS" : mode == 't' ? "Ss" : nullptr;            // ß
  else if (cp == 0x130 && mode == 'l') s = "i\xCC\x87";                           // İ
  else if (cp >= 0xFB00 && cp <= 0xFB06 && mode != 'l') {                           // ﬀ..ﬆ
    static const char* kUpper[] = {"FF", "FI", "FL", "FFI", "FFL", "ST", "ST"};
    static const char* kTitle[] = {"Ff", "Fi", "Fl", "Ffi", "Ffl", "St", "St"};
    s = (mode == 'u' ? kUpper : kTitle)[cp - 0xFB00];
  }
  if (!s) return false;
  out += s;
  return true;
}

void append_upper(std::string& out, char32_t cp) {
  if (!append_special(out, cp, 'u')) append_utf8(out, to_upper_cp(cp));
}
void append_lower(std::string& out, char32_t cp) {
  if (!append_special(out, cp, 'l')) append_utf8(out, to_lower_cp(cp));
}
void append_title(std::string& out, char32_t cp) {
  if (!append_special(out, cp, 't')) append_utf8(out, to_title_cp(cp));
}

bool is_printable(char32_t cp) {
  if (cp == ' ') return true;
  if (cp >= 0xDC00 && cp <= 0xDCFF) return false;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::vector<size_t> codepoint_offsets(std::string_view s) {
  std::vector<size_t> out;
  out.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size();) {
    out.push_back(i);
    size_t n = sequence_length(s, i);
    i += n == 0 ? 1 : n;
  }
  out.push_back(s.size());
  return out;
}

size_t codepoint_count(std::string_view s) {
  size_t count = 0;
  for (size_t i = 0; i < s.size(); ++count) {
    size_t n = sequence_length(s, i);
    i += n == 0 ? 1 : n;
  }
  return count;
}

std::vector<char32_t> decode_utf8(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = sequence_length(s, i);
    if (n == 0) {
      out.push_back(0xDC00 + static_cast<unsigned char>(s[i]));
      ++i;
      continue;
    }
    utf8proc_int32_t cp = 0;
    utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                     static_cast<utf8proc_ssize_t>(n), &cp);
    out.push_back(static_cast<char32_t>(cp));
    i += n;
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp >= 0xDC80 && cp <= 0xDCFF) {  // an escaped invalid byte
    out.push_back(static_cast<char>(cp - 0xDC00));
    return;
  }
  utf8proc_uint8_t buf[4];
  auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

std::string encode_utf8(const std::vector<char32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) append_utf8(out, cp);
  return out;
}

bool is_py_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 ||
         cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                     bool right) {
  std::vector<char32_t> set;
  if (chars) set = decode_utf8(*chars);
  auto strip_it = [&](size_t at, size_t n) {
    char32_t cp = decode_utf8(s.substr(at, n))[0];
    if (!chars) return is_py_space(cp);
    for (char32_t c : set) if (c == cp) return true;
    return false;
  };
  // Walks code points from each end only as far as they strip; the middle is never decoded.
  size_t b = 0, e = s.size();
  while (left && b < e) {
    size_t n = sequence_length(s, b);
    if (n == 0) n = 1;
    if (!strip_it(b, n)) break;
    b += n;
  }
  while (right && e > b) {
    size_t start = e - 1;
    while (start > b && e - start < 4 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    if (sequence_length(s, start) != e - start) start = e - 1;  // an invalid byte is one unit
    if (!strip_it(start, e - start)) break;
    e = start;
  }
  return std::string(s.substr(b, e - b));
}

std::string py_upper(std::string_view s) {
  std::string out;
  for (char32_t cp : decode_utf8(s)) append_upper(out, cp);
  return out;
}

std::string py_lower(std::string_view s) {
  std::string out;
  for (char32_t cp : decode_utf8(s)) append_lower(out, cp);
  return out;
}

std::string py_capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (char32_t cp : decode_utf8(s)) {
    if (first) append_title(out, cp); else append_lower(out, cp);
    first = false;
  }
  return out;
}

std::string py_title(std::string_view s) {
  std::string out;
  bool previous_cased = false;
  for (char32_t cp : decode_utf8(s)) {
    if (previous_cased) append_lower(out, cp); else append_title(out, cp);
    previous_cased = is_cased(cp);
  }
  return out;
}

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) throw_error("ValueError: empty separator");
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t hit = s.find(*sep, pos);
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, hit - pos));
      pos = hit + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  std::vector<char32_t> cps = decode_utf8(s);
  size_t i = 0;
  while (true) {
    while (i < cps.size() && is_py_space(cps[i])) ++i;
    if (i == cps.size()) break;
    std::string word;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      size_t e = cps.size();
      while (e > i && is_py_space(cps[e - 1])) --e;
      for (; i < e; ++i) append_utf8(word, cps[i]);
      out.push_back(std::move(word));
      break;
    }
    while (i < cps.size() && !is_py_space(cps[i])) append_utf8(word, cps[i++]);
    out.push_back(std::move(word));
  }
  return out;
}

std::string py_replace(std::string_view s, std::string_view from, std::string_view to,
                       int64_t count) {
  std::string out;
  if (from.empty()) {
    std::vector<size_t> offs = codepoint_offsets(s);
    int64_t done = 0;
    for (size_t k = 0; k + 1 < offs.size(); ++k) {
      if (count < 0 || done < count) { out.append(to); ++done; }
      out.append(s.substr(offs[k], offs[k + 1] - offs[k]));
    }
    if (count < 0 || done < count) out.append(to);
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

int64_t py_count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(codepoint_count(s)) + 1;
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size())) ++n;
  return n;
}

std::string py_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci is "[-]d[.ddd]e[+-]xx": split into sign, digits and exponent.
  std::string sign;
  size_t i = 0;
  if (sci[0] == '-') { sign = "-"; i = 1; }
  size_t epos = sci.find('e');
  std::string digits;
  for (size_t k = i; k < epos; ++k) if (sci[k] != '.') digits.push_back(sci[k]);
  int exp = std::stoi(sci.substr(epos + 1));
  if (exp < -4 || exp >= 16) {
    std::string out = sign;
    out.append(digits, 0, 1);
    if (digits.size() > 1) out.append(1, '.').append(digits, 1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return out + ebuf;
  }
  std::string out = sign;
  if (exp < 0) {
    out.append("0.").append(static_cast<size_t>(-exp - 1), '0').append(digits);
  } else if (static_cast<int>(digits.size()) <= exp + 1) {
    out.append(digits).append(static_cast<size_t>(exp + 1) - digits.size(), '0').append(".0");
  } else {
    auto point = static_cast<size_t>(exp + 1);
    out.append(digits, 0, point).append(1, '.').append(digits, point);
  }
  return out;
}

std::string py_string_repr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t cp : decode_utf8(s)) {
    char buf[16];
    if (cp == '\\') out += "\\\\";
    else if (cp == static_cast<char32_t>(quote)) { out += '\\'; out += quote; }
    else if (cp == '\n') out += "\\n";
    else if (cp == '\r') out += "\\r";
    else if (cp == '\t') out += "\\t";
    else if (is_printable(cp)) append_utf8(out, cp);
    else {
      if (cp >= 0xDC80 && cp <= 0xDCFF) cp -= 0xDC00;  // invalid byte: show as \xNN
      if (cp < 0x100) std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(cp));
      else if (cp < 0x10000) std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
      else std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(cp));
      out += buf;
    }
  }
  out += quote;
  return out;
}

}  // namespace folio::jinja
