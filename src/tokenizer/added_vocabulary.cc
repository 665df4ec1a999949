#include "tokenizer/added_vocabulary.h"

#include <utf8proc.h>

#include "tokenizer/utf8.h"

namespace folio {
namespace {

bool is_word_char(char32_t cp) {
  if (cp == '_') return true;
  auto cat = utf8proc_category(static_cast<int32_t>(cp));
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

bool is_space(char32_t cp) {
  return cp == ' ' || (cp >= '\t' && cp <= '\r') || cp == 0x85 || cp == 0xA0 ||
         utf8proc_category(static_cast<int32_t>(cp)) == UTF8PROC_CATEGORY_ZS || cp == 0x2028 ||
         cp == 0x2029;
}

// The code point ending just before byte `end` and where it starts.
char32_t prev_codepoint(std::string_view s, size_t end, size_t& start) {
  start = end - 1;
  while (start > 0 && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) --start;
  size_t p = start;
  return next_codepoint(s, p);
}

}  // namespace

void AddedVocabulary::Matcher::add(std::string_view content, int32_t token_index) {
  int32_t node = 0;
  for (char c : content) {
    uint8_t b = static_cast<uint8_t>(c);
    auto it = nodes[node].next.find(b);
    if (it == nodes[node].next.end()) {
      nodes.push_back(Node{});
      int32_t child = static_cast<int32_t>(nodes.size() - 1);
      nodes[node].next.emplace(b, child);
      node = child;
    } else {
      node = it->second;
    }
  }
  nodes[node].token = token_index;
  first_byte[static_cast<uint8_t>(content[0])] = true;
  tokens.push_back(token_index);
}

std::pair<int32_t, size_t> AddedVocabulary::Matcher::longest_at(std::string_view text,
                                                                size_t pos) const {
  std::pair<int32_t, size_t> best{-1, 0};
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    auto it = nodes[node].next.find(static_cast<uint8_t>(text[i]));
    if (it == nodes[node].next.end()) break;
    node = it->second;
    if (nodes[node].token >= 0) best = {nodes[node].token, i + 1 - pos};
  }
  return best;
}

Result<AddedVocabulary> AddedVocabulary::from_json(const nlohmann::json& added_tokens) {
  AddedVocabulary v;
  if (added_tokens.is_null()) return v;
  if (!added_tokens.is_array()) return invalid_argument("\"added_tokens\" must be an array");
  for (const auto& t : added_tokens) {
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
        !t.contains("content") || !t["content"].is_string()) {
      return invalid_argument("added_tokens entry without integer \"id\" and string \"content\": " +
                              t.dump());
    }
    AddedToken a;
    a.id = t["id"].get<int32_t>();
    a.content = t["content"].get<std::string>();
    if (a.content.empty() || a.id < 0) {
      return invalid_argument("added_tokens entry with empty content or negative id: " + t.dump());
    }
    auto flag = [&](const char* k) { return t.contains(k) && t[k].is_boolean() && t[k].get<bool>(); };
    a.special = flag("special");
    a.single_word = flag("single_word");
    a.lstrip = flag("lstrip");
    a.rstrip = flag("rstrip");
    a.normalized = flag("normalized");
    int32_t index = static_cast<int32_t>(v.tokens_.size());
    v.by_id_[a.id] = v.tokens_.size();
    v.by_content_[a.content] = a.id;
    v.matchers_[a.normalized ? 1 : 0].add(a.content, index);
    v.tokens_.push_back(std::move(a));
  }
  return v;
}

const AddedToken* AddedVocabulary::find_by_id(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<int32_t> AddedVocabulary::find_by_content(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

void AddedVocabulary::split(std::string_view text, bool normalized,
                            std::vector<Segment>& out) const {
  const Matcher& m = matchers_[normalized ? 1 : 0];
  size_t start_offset = 0;  // end of the previous emitted segment
  size_t pos = 0;
  while (pos < text.size()) {
    if (m.tokens.empty()) break;
    if (!m.first_byte[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    auto [index, len] = m.longest_at(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& tok = tokens_[index];
    size_t start = pos, stop = pos + len;
    pos = stop;  // matches never overlap, even when a flag below rejects this one
    if (tok.single_word) {
      size_t s = 0;
      bool word_before = start > 0 && is_word_char(prev_codepoint(text, start, s));
      size_t p = stop;
      bool word_after = stop < text.size() && is_word_char(next_codepoint(text, p));
      if (word_before || word_after) continue;
    }
    if (tok.lstrip) {
      while (start > start_offset) {
        size_t s = 0;
        if (!is_space(prev_codepoint(text, start, s))) break;
        start = s;
      }
    }
    if (tok.rstrip) {
      while (stop < text.size()) {
        size_t p = stop;
        if (!is_space(next_codepoint(text, p))) break;
        stop = p;
      }
      pos = stop;
    }
    if (start > start_offset) out.push_back({text.substr(start_offset, start - start_offset), -1, start_offset});
    out.push_back({text.substr(start, stop - start), tok.id, start});
    start_offset = stop;
  }
  if (start_offset < text.size()) {
    out.push_back({text.substr(start_offset), -1, start_offset});
  }
}

}  // namespace folio
