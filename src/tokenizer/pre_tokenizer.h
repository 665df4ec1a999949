// The tokenizer.json "pre_tokenizer": splits one normalized piece of text into the words that the
// BPE model tokenizes independently. Supported: Split (regex or literal pattern, every HF
// delimiter behavior, invert), ByteLevel (optional GPT-2 regex and prefix space), Metaspace
// (replacement, prepend_scheme always/first/never, split), Digits, Whitespace, WhitespaceSplit,
// Sequence. ByteLevel's byte-to-character mapping is not done here: a byte-level tokenizer's
// vocabulary is translated to raw bytes at load time instead (see byte_level.h).
// Immutable after construction; thread-safe.
#pragma once

#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "tokenizer/regex.h"

namespace folio {

class PreTokenizer {
 public:
  // `j` is the "pre_tokenizer" value (null: the whole piece is one word).
  static Result<PreTokenizer> from_json(const nlohmann::json& j);

  // True when a ByteLevel step is present: the model then works on raw bytes.
  bool byte_level() const { return byte_level_; }

  // Appends the words of `text` to `out`. `at_start`: `text` begins the original input (for
  // Metaspace's "first" scheme). Views point into `text` or into strings kept in `arena`.
  void split(std::string_view text, bool at_start, std::vector<std::string_view>& out,
             std::deque<std::string>& arena) const;

 private:
  enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
  enum class Kind { kSplit, kPrefixSpace, kMetaspaceReplace };
  struct Step {
    Kind kind = Kind::kSplit;
    Regex pattern;                 // kSplit
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
    std::string replacement;       // kMetaspaceReplace: the "▁" string
    int prepend = 0;               // kMetaspaceReplace: 0 never, 1 first, 2 always
  };
  Status add_steps(const nlohmann::json& j);
  static void apply_split(const Step& s, std::string_view piece, std::vector<std::string_view>& out);

  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace folio
