#include "tokenizer/normalizer.h"

#include <cstdlib>

#include <utf8proc.h>

#include "tokenizer/utf8.h"

namespace folio {

Result<Regex> load_pattern(const nlohmann::json& pattern) {
  if (pattern.is_object() && pattern.contains("String") && pattern["String"].is_string()) {
    return Regex::literal(pattern["String"].get<std::string>());
  }
  if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string()) {
    return Regex::compile(pattern["Regex"].get<std::string>());
  }
  return invalid_argument("pattern must be {\"String\": ...} or {\"Regex\": ...}, got " +
                          pattern.dump());
}

std::string unicode_normalize(std::string_view text, std::string_view form) {
  // Every code point below U+0300 is stable under NFC and NFD and never composes with a
  // following one of the same range (lead bytes below 0xCC), so such text is unchanged.
  bool compat = form == "NFKC" || form == "NFKD";
  if (!compat) {
    bool all_low = true;
    for (char c : text) all_low &= static_cast<uint8_t>(c) < 0xCC;
    if (all_low) return std::string(text);
  } else {
    bool ascii = true;
    for (char c : text) ascii &= static_cast<uint8_t>(c) < 0x80;
    if (ascii) return std::string(text);
  }
  int options = UTF8PROC_STABLE;
  if (form == "NFC" || form == "NFKC") options |= UTF8PROC_COMPOSE;
  else options |= UTF8PROC_DECOMPOSE;
  if (compat) options |= UTF8PROC_COMPAT;
  utf8proc_uint8_t* out = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                    static_cast<utf8proc_ssize_t>(text.size()), &out,
                                    static_cast<utf8proc_option_t>(options));
  if (n < 0) return std::string(text);  // invalid input: leave it alone
  std::string result(reinterpret_cast<char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

namespace {

std::string lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t cp = next_codepoint(text, pos);
    append_codepoint(out, static_cast<char32_t>(utf8proc_tolower(static_cast<int32_t>(cp))));
  }
  return out;
}

bool is_space_cp(char32_t cp) {
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<int32_t>(cp));
  return cp == '\t' || cp == '\n' || cp == '\v' || cp == '\f' || cp == '\r' ||
         p->category == UTF8PROC_CATEGORY_ZS || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

std::string strip(std::string_view text, bool left, bool right) {
  size_t b = 0, e = text.size();
  if (left) {
    while (b < e) {
      size_t p = b;
      if (!is_space_cp(next_codepoint(text, p))) break;
      b = p;
    }
  }
  if (right) {
    while (e > b) {
      size_t s = e - 1;
      while (s > b && (static_cast<uint8_t>(text[s]) & 0xC0) == 0x80) --s;
      size_t p = s;
      if (!is_space_cp(next_codepoint(text, p))) break;
      e = s;
    }
  }
  return std::string(text.substr(b, e - b));
}

}  // namespace

Status Normalizer::add_steps(const nlohmann::json& j, std::vector<Step>& steps) {
  if (j.is_null()) return Status();
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return invalid_argument("normalizer must be an object with a \"type\"");
  }
  const std::string type = j["type"].get<std::string>();
  if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array()) {
      return invalid_argument("Sequence normalizer without a \"normalizers\" array");
    }
    for (const auto& sub : j["normalizers"]) FOLIO_RETURN_IF_ERROR(add_steps(sub, steps));
    return Status();
  }
  Step s{Kind::kNfc, "", Regex(), false, false};
  if (type == "NFC") s.kind = Kind::kNfc;
  else if (type == "NFD") s.kind = Kind::kNfd;
  else if (type == "NFKC") s.kind = Kind::kNfkc;
  else if (type == "NFKD") s.kind = Kind::kNfkd;
  else if (type == "Lowercase") s.kind = Kind::kLowercase;
  else if (type == "Prepend") {
    s.kind = Kind::kPrepend;
    s.text = j.value("prepend", std::string());
  } else if (type == "Replace") {
    s.kind = Kind::kReplace;
    if (!j.contains("pattern") || !j.contains("content") || !j["content"].is_string()) {
      return invalid_argument("Replace normalizer needs \"pattern\" and \"content\"");
    }
    FOLIO_ASSIGN_OR_RETURN(s.pattern, load_pattern(j["pattern"]));
    s.text = j["content"].get<std::string>();
  } else if (type == "Strip") {
    s.kind = Kind::kStrip;
    s.left = j.value("strip_left", true);
    s.right = j.value("strip_right", true);
  } else {
    return unimplemented("normalizer type \"" + type + "\" is not supported");
  }
  steps.push_back(std::move(s));
  return Status();
}

Result<Normalizer> Normalizer::from_json(const nlohmann::json& j) {
  Normalizer n;
  FOLIO_RETURN_IF_ERROR(add_steps(j, n.steps_));
  return n;
}

std::string Normalizer::apply_step(const Step& s, std::string text) {
  switch (s.kind) {
    case Kind::kNfc: return unicode_normalize(text, "NFC");
    case Kind::kNfd: return unicode_normalize(text, "NFD");
    case Kind::kNfkc: return unicode_normalize(text, "NFKC");
    case Kind::kNfkd: return unicode_normalize(text, "NFKD");
    case Kind::kLowercase: return lowercase(text);
    case Kind::kPrepend: return text.empty() ? text : s.text + text;  // HF: only non-empty
    case Kind::kReplace: return s.pattern.replace_all(text, s.text);
    case Kind::kStrip: return strip(text, s.left, s.right);
  }
  return text;
}

std::string Normalizer::apply(std::string_view text) const {
  std::string out(text);
  for (const Step& s : steps_) out = apply_step(s, std::move(out));
  return out;
}

}  // namespace folio
