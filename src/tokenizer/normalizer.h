// The tokenizer.json "normalizer": a list of string transforms applied to each piece of input
// text that is not an added token, before pre-tokenization. Supported: NFC, NFD, NFKC, NFKD
// (utf8proc), Lowercase, Prepend, Replace (String or Regex pattern), Strip, Sequence.
// Immutable after construction; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "tokenizer/regex.h"

namespace folio {

class Normalizer {
 public:
  // `j` is the "normalizer" value (null means none). Unknown types are Unimplemented.
  static Result<Normalizer> from_json(const nlohmann::json& j);

  bool empty() const { return steps_.empty(); }
  // Applies every step in order to valid UTF-8 `text`.
  std::string apply(std::string_view text) const;

 private:
  enum class Kind { kNfc, kNfd, kNfkc, kNfkd, kLowercase, kPrepend, kReplace, kStrip };
  struct Step {
    Kind kind;
    std::string text;  // Prepend: the prefix; Replace: the replacement
    Regex pattern;     // Replace
    bool left = false, right = false;  // Strip
  };
  static Status add_steps(const nlohmann::json& j, std::vector<Step>& steps);
  static std::string apply_step(const Step& s, std::string text);

  std::vector<Step> steps_;
};

// Unicode normalization of valid UTF-8 with utf8proc; `form` is one of "NFC", "NFD", "NFKC",
// "NFKD". Text that cannot change (e.g. below U+0300 for NFC) is returned as is.
std::string unicode_normalize(std::string_view text, std::string_view form);

// Loads a {"String": s} or {"Regex": r} pattern object as a Regex.
Result<Regex> load_pattern(const nlohmann::json& pattern);

}  // namespace folio
