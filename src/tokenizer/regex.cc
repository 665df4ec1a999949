#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace folio {

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

Result<Regex> Regex::compile(const std::string& pattern) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_UTF | PCRE2_UCP, &err, &err_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    return invalid_argument("regex /" + pattern + "/ does not compile at offset " +
                            std::to_string(err_offset) + ": " +
                            reinterpret_cast<const char*>(msg));
  }
  auto c = std::make_shared<Code>();
  c->code = code;
  c->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  Regex r;
  r.code_ = std::move(c);
  return r;
}

Result<Regex> Regex::literal(const std::string& text) {
  if (text.empty()) return invalid_argument("empty literal pattern");
  Regex r;
  r.literal_ = text;
  return r;
}

void Regex::for_each_match(std::string_view text,
                           const std::function<void(size_t, size_t)>& on_match) const {
  if (!literal_.empty()) {
    size_t pos = 0;
    while ((pos = text.find(literal_, pos)) != std::string_view::npos) {
      on_match(pos, pos + literal_.size());
      pos += literal_.size();
    }
    return;
  }
  // Match data is small; a thread-local one avoids an allocation per call.
  thread_local std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
      pcre2_match_data_create(4, nullptr), &pcre2_match_data_free);
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    int rc = code_->jit ? pcre2_jit_match(code_->code, subject, text.size(), pos, 0, md.get(),
                                          nullptr)
                        : pcre2_match(code_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK,
                                      md.get(), nullptr);
    if (rc < 0) return;  // no more matches (or a match-time error: treat as no match)
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    size_t b = ov[0], e = ov[1];
    if (e > b) {
      on_match(b, e);
      pos = e;
    } else {
      // Empty match: step over one whole character.
      pos = b + 1;
      while (pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) ++pos;
    }
  }
}

std::string Regex::replace_all(std::string_view text, std::string_view replacement) const {
  std::string out;
  out.reserve(text.size());
  size_t last = 0;
  for_each_match(text, [&](size_t b, size_t e) {
    out.append(text.substr(last, b - last));
    out.append(replacement);
    last = e;
  });
  out.append(text.substr(last));
  return out;
}

}  // namespace folio
