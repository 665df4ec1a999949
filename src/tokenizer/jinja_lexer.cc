#include "tokenizer/jinja_lexer.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_text.h"

namespace folio::jinja {
namespace {

std::string normalize_newlines(std::string_view s, bool keep_trailing_newline) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out += s[i];
    }
  }
  if (!keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  Lexer(std::string src, const LexOptions& o) : src_(std::move(src)), o_(o) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      size_t idx = find_tag(pos_);
      if (idx == std::string::npos) {
        emit_text(src_.substr(pos_), line_);
        break;
      }
      lex_tag(idx);
    }
    out_.push_back(Token{TokenType::kEof, "", line_});
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const {
    throw JinjaError{ErrorKind::kSyntax, msg, line_};
  }

  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && std::strchr("{%#", src_[i + 1]) && src_[i + 1] != '\0') return i;
    }
    return std::string::npos;
  }

  char at(size_t i) const { return i < src_.size() ? src_[i] : '\0'; }
  bool starts(size_t i, const char* s) const { return src_.compare(i, std::strlen(s), s) == 0; }

  void emit_text(std::string text, int line) {
    if (!text.empty()) out_.push_back(Token{TokenType::kText, std::move(text), line});
  }

  // Applies `{%-` / lstrip_blocks to the text before a tag starting at `tag`.
  std::string text_before(size_t start, size_t tag, char kind, char ctrl) const {
    std::string data = src_.substr(start, tag - start);
    if (ctrl == '-') return py_strip(data, std::nullopt, false, true);
    if (o_.lstrip_blocks && kind != '{' && ctrl != '+') {
      size_t nl = data.rfind('\n');
      size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      bool line_starting = start == 0 || src_[start - 1] == '\n';
      if ((l_pos > 0 || line_starting) && l_pos < data.size() &&
          data.find_first_not_of(" \t\f\v", l_pos) == std::string::npos) {
        data.resize(l_pos);
      }
    }
    return data;
  }

  void advance_to(size_t p) {
    for (size_t i = pos_; i < p && i < src_.size(); ++i) line_ += src_[i] == '\n';
    pos_ = p;
  }

  // After a tag: `-` strips all following whitespace; trim_blocks drops one newline.
  void after_tag(size_t p, bool strip, bool trim) {
    advance_to(p);
    if (strip) {
      std::vector<size_t> offs = codepoint_offsets(std::string_view(src_).substr(pos_));
      size_t q = pos_;
      for (size_t k = 0; k + 1 < offs.size(); ++k) {
        auto cps = decode_utf8(std::string_view(src_).substr(pos_ + offs[k], offs[k + 1] - offs[k]));
        if (cps.empty() || !is_py_space(cps[0])) break;
        q = pos_ + offs[k + 1];
      }
      advance_to(q);
    } else if (trim && at(pos_) == '\n') {
      advance_to(pos_ + 1);
    }
  }

  void lex_tag(size_t idx) {
    char kind = src_[idx + 1];
    char ctrl = at(idx + 2);
    if (kind == '{' && ctrl == '+') ctrl = '\0';
    int text_line = line_;
    emit_text(text_before(pos_, idx, kind, ctrl), text_line);
    advance_to(idx);
    size_t p = idx + 2 + ((ctrl == '-' || ctrl == '+') ? 1 : 0);
    if (kind == '#') return lex_comment(p);
    if (kind == '%' && lex_raw(p)) return;
    out_.push_back(Token{kind == '{' ? TokenType::kVarBegin : TokenType::kBlockBegin, "", line_});
    advance_to(p);
    lex_expression(kind);
  }

  void lex_comment(size_t p) {
    size_t end = src_.find("#}", p);
    if (end == std::string::npos) fail("unclosed comment: missing '#}'");
    bool strip = end > p && src_[end - 1] == '-';
    after_tag(end + 2, strip, o_.trim_blocks);
  }

  // `{% raw %}...{% endraw %}`: returns false when the block at p is not raw.
  bool lex_raw(size_t p) {
    size_t q = p;
    while (std::isspace(static_cast<unsigned char>(at(q)))) ++q;
    if (!starts(q, "raw") || is_ident_char(at(q + 3))) return false;
    q += 3;
    while (std::isspace(static_cast<unsigned char>(at(q)))) ++q;
    bool strip_body_start = at(q) == '-';
    if (at(q) == '-' || at(q) == '+') ++q;
    if (!starts(q, "%}")) return false;
    size_t body = q + 2;
    if (strip_body_start) {
      while (body < src_.size() && std::isspace(static_cast<unsigned char>(src_[body]))) ++body;
    }
    for (size_t s = src_.find("{%", body); s != std::string::npos; s = src_.find("{%", s + 1)) {
      size_t r = s + 2;
      char ctrl = at(r);
      if (ctrl == '-' || ctrl == '+') ++r;
      while (std::isspace(static_cast<unsigned char>(at(r)))) ++r;
      if (!starts(r, "endraw") || is_ident_char(at(r + 6))) continue;
      r += 6;
      while (std::isspace(static_cast<unsigned char>(at(r)))) ++r;
      char end_ctrl = at(r);
      if (end_ctrl == '-' || end_ctrl == '+') ++r;
      if (!starts(r, "%}")) continue;
      int raw_line = line_;
      emit_text(text_before(body, s, '%', ctrl), raw_line);
      after_tag(r + 2, end_ctrl == '-', o_.trim_blocks && end_ctrl != '+');
      return true;
    }
    fail("missing '{% endraw %}' for '{% raw %}'");
  }

  void lex_expression(char kind) {
    int depth = 0;
    while (true) {
      while (pos_ < src_.size() && std::isspace(static_cast<unsigned char>(src_[pos_]))) {
        advance_to(pos_ + 1);
      }
      if (pos_ >= src_.size()) fail(kind == '{' ? "unclosed '{{': missing '}}'" : "unclosed '{%': missing '%}'");
      if (depth == 0 && lex_tag_end(kind)) return;
      char c = src_[pos_];
      if (is_ident_start(c)) {
        size_t e = pos_;
        while (e < src_.size() && is_ident_char(src_[e])) ++e;
        out_.push_back(Token{TokenType::kName, src_.substr(pos_, e - pos_), line_});
        advance_to(e);
      } else if (is_digit(c)) {
        lex_number();
      } else if (c == '\'' || c == '"') {
        lex_string(c);
      } else {
        lex_operator(depth);
      }
    }
  }

  bool lex_tag_end(char kind) {
    const char* close = kind == '{' ? "}}" : "%}";
    char c = src_[pos_];
    bool strip = c == '-' && starts(pos_ + 1, close);
    bool keep = kind == '%' && c == '+' && starts(pos_ + 1, close);
    if (!strip && !keep && !starts(pos_, close)) return false;
    size_t end = pos_ + 2 + ((strip || keep) ? 1 : 0);
    out_.push_back(Token{kind == '{' ? TokenType::kVarEnd : TokenType::kBlockEnd, "", line_});
    after_tag(end, strip, kind == '%' && !keep && o_.trim_blocks);
    return true;
  }

  // 0x1f, 0o17, 0b101 (underscores allowed), as Jinja's integer literals.
  bool lex_radix_number() {
    char r = static_cast<char>(std::tolower(at(pos_ + 1)));
    int base = r == 'x' ? 16 : r == 'o' ? 8 : r == 'b' ? 2 : 0;
    if (src_[pos_] != '0' || base == 0) return false;
    size_t e = pos_ + 2;
    std::string digits;
    while (e < src_.size() && (std::isxdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) {
      if (src_[e] != '_') digits += src_[e];
      ++e;
    }
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(digits.c_str(), &end, base);
    if (digits.empty() || *end != '\0' || errno == ERANGE) fail("bad integer literal '" + src_.substr(pos_, e - pos_) + "'");
    Token t{TokenType::kInt, src_.substr(pos_, e - pos_), line_};
    t.int_value = v;
    out_.push_back(std::move(t));
    advance_to(e);
    return true;
  }

  void lex_number() {
    if (lex_radix_number()) return;
    size_t e = pos_;
    std::string digits;
    auto take_digits = [&] {
      while (e < src_.size() && (is_digit(src_[e]) || (src_[e] == '_' && is_digit(at(e + 1))))) {
        if (src_[e] != '_') digits += src_[e];
        ++e;
      }
    };
    take_digits();
    bool is_float = false;
    bool after_dot = !out_.empty() && out_.back().type == TokenType::kOp && out_.back().text == ".";
    if (!after_dot && at(e) == '.' && is_digit(at(e + 1))) {
      is_float = true;
      digits += src_[e++];
      take_digits();
    }
    if (!after_dot && (at(e) == 'e' || at(e) == 'E')) {
      size_t f = e + 1;
      if (at(f) == '+' || at(f) == '-') ++f;
      if (is_digit(at(f))) {
        is_float = true;
        digits += 'e';
        digits += src_.substr(e + 1, f - e - 1);
        e = f;
        take_digits();
      }
    }
    Token t{is_float ? TokenType::kFloat : TokenType::kInt, digits, line_};
    if (is_float) {
      t.float_value = std::strtod(digits.c_str(), nullptr);
    } else {
      errno = 0;
      t.int_value = std::strtoll(digits.c_str(), nullptr, 10);
      if (errno == ERANGE) fail("integer literal too large: " + digits);
    }
    out_.push_back(std::move(t));
    advance_to(e);
  }

  void lex_string(char quote);
  void lex_operator(int& depth);

  std::string src_;
  LexOptions o_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> out_;
};

// Python string-literal escapes (Jinja decodes literals with unicode-escape).
void Lexer::lex_string(char quote) {
  size_t e = pos_ + 1;
  std::string value;
  int start_line = line_;
  while (true) {
    if (e >= src_.size()) fail("unterminated string literal");
    char c = src_[e];
    if (c == quote) break;
    if (c != '\\') { value += c; ++e; continue; }
    char n = at(e + 1);
    e += 2;
    auto hex = [&](int digits) {
      uint32_t cp = 0;
      for (int k = 0; k < digits; ++k, ++e) {
        char h = at(e);
        if (!std::isxdigit(static_cast<unsigned char>(h))) fail("bad \\x/\\u escape in string literal");
        cp = cp * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
      }
      if (cp > 0x10FFFF) fail("escape out of Unicode range in string literal");
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;  // lone surrogates have no UTF-8 form
      append_utf8(value, cp);
    };
    switch (n) {
      case 'n': value += '\n'; break;
      case 't': value += '\t'; break;
      case 'r': value += '\r'; break;
      case '\\': value += '\\'; break;
      case '\'': value += '\''; break;
      case '"': value += '"'; break;
      case 'a': value += '\a'; break;
      case 'b': value += '\b'; break;
      case 'f': value += '\f'; break;
      case 'v': value += '\v'; break;
      case '0': value += '\0'; break;
      case '\n': break;  // line continuation
      case 'x': hex(2); break;
      case 'u': hex(4); break;
      case 'U': hex(8); break;
      default: value += '\\'; value += n; break;
    }
  }
  Token t{TokenType::kString, std::move(value), start_line};
  out_.push_back(std::move(t));
  advance_to(e + 1);
}

void Lexer::lex_operator(int& depth) {
  static const char* kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
  for (const char* op : kTwo) {
    if (starts(pos_, op)) {
      out_.push_back(Token{TokenType::kOp, op, line_});
      advance_to(pos_ + 2);
      return;
    }
  }
  char c = src_[pos_];
  if (!std::strchr("+-*/%~<>=()[]{},.:|", c)) {
    fail(std::string("unexpected character '") + c + "' in tag");
  }
  if (c == '(' || c == '[' || c == '{') ++depth;
  if (c == ')' || c == ']' || c == '}') {
    if (depth == 0) fail(std::string("unexpected '") + c + "'");
    --depth;
  }
  out_.push_back(Token{TokenType::kOp, std::string(1, c), line_});
  advance_to(pos_ + 1);
}

}  // namespace

std::vector<Token> lex(std::string_view source, const LexOptions& options) {
  return Lexer(normalize_newlines(source, options.keep_trailing_newline), options).run();
}

}  // namespace folio::jinja
