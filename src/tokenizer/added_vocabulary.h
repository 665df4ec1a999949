// The tokenizer.json "added_tokens": tokens matched verbatim in the input before normalization
// and pre-tokenization (special tokens such as <|im_start|>, and non-special ones such as
// <think>). Matching is leftmost-longest over the tokens' contents, like HF's Aho-Corasick, then
// each match honours its token's single_word / lstrip / rstrip flags. Tokens flagged
// `normalized` are matched after the normalizer runs, the others on the raw text.
// Immutable after construction; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace folio {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool single_word = false, lstrip = false, rstrip = false, normalized = false;
};

// One piece of a split: either an added token (`id` >= 0) or plain text to tokenize.
struct Segment {
  std::string_view text;
  int32_t id = -1;
  size_t offset = 0;  // byte offset of `text` in the split string
};

class AddedVocabulary {
 public:
  static Result<AddedVocabulary> from_json(const nlohmann::json& added_tokens);

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  const AddedToken* find_by_id(int32_t id) const;
  std::optional<int32_t> find_by_content(std::string_view content) const;

  // Splits `text` on the added tokens whose `normalized` flag equals `normalized`; appends
  // segments (in order, covering the text except what lstrip/rstrip swallowed) to `out`.
  void split(std::string_view text, bool normalized, std::vector<Segment>& out) const;
  bool has_normalized_tokens() const { return !matchers_[1].tokens.empty(); }

 private:
  // A byte trie over the contents of one group of tokens.
  struct Matcher {
    struct Node {
      std::unordered_map<uint8_t, int32_t> next;
      int32_t token = -1;  // index into tokens_ of the token ending here
    };
    std::vector<Node> nodes{Node{}};
    std::vector<int32_t> tokens;
    std::array<bool, 256> first_byte{};
    void add(std::string_view content, int32_t token_index);
    // Longest token starting at `pos`: (token index, length), or (-1, 0).
    std::pair<int32_t, size_t> longest_at(std::string_view text, size_t pos) const;
  };

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, int32_t> by_content_;
  std::array<Matcher, 2> matchers_;  // [0]: not normalized, [1]: normalized
};

}  // namespace folio
