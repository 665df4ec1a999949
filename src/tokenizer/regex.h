// A compiled PCRE2 pattern (UTF + UCP, JIT when available) for the tokenizer's Split
// pre-tokenizer and Replace normalizer/decoder. HF `tokenizers` uses Oniguruma; the patterns
// found in tokenizer.json files (Unicode classes, look-ahead, (?i:...)) mean the same in PCRE2.
// Immutable after compile and safe to share across threads (match data is per call).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace folio {

class Regex {
 public:
  // Compiles `pattern`; an error names the pattern and PCRE2's message and offset.
  static Result<Regex> compile(const std::string& pattern);
  // A literal (non-regex) pattern, as HF's {"String": ...} patterns.
  static Result<Regex> literal(const std::string& text);

  // Calls on_match(begin, end) for each successive non-overlapping match in `text`, which must
  // be valid UTF-8 (not re-checked). Empty matches are skipped.
  void for_each_match(std::string_view text,
                      const std::function<void(size_t, size_t)>& on_match) const;

  // Replaces every match with `replacement` (literal text).
  std::string replace_all(std::string_view text, std::string_view replacement) const;

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
  std::string literal_;  // non-empty: literal search instead of PCRE2
};

}  // namespace folio
