// The tokenizer.json "decoder": turns token strings back into text. Supported steps: ByteLevel,
// Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence; no decoder joins tokens with spaces.
// `decode` follows HF `tokenizers`' decode_chain step by step (the reference semantics); the
// streaming form of the same chain lives in incremental_detokenizer.h and reads `steps()`.
// Immutable after construction; thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "tokenizer/regex.h"

namespace folio {

class Decoder {
 public:
  enum class Kind { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace, kJoinSpace };
  struct Step {
    Kind kind = Kind::kFuse;
    Regex pattern;          // kReplace
    std::string literal;    // kReplace: the pattern when it is a plain string
    std::string content;    // kReplace: replacement; kStrip: the stripped character
    char32_t strip_char = 0;
    int start = 0, stop = 0;     // kStrip
    std::string replacement;     // kMetaspace: the "▁" character
    bool prepend = true;         // kMetaspace: drop replacements in the first token
  };

  // `j` is the "decoder" value (null: join with spaces). Also checks that the chain can be
  // streamed exactly (see incremental_detokenizer.h) and reports the step that cannot.
  static Result<Decoder> from_json(const nlohmann::json& j);

  std::string decode(std::vector<std::string> tokens) const;
  const std::vector<Step>& steps() const { return steps_; }

  // Parses "<0xAB>" (HF's byte-fallback token form); -1 if `token` is not one.
  static int parse_byte_token(std::string_view token);

 private:
  Status add_steps(const nlohmann::json& j);
  Status check_streamable() const;
  static void apply(const Step& s, std::vector<std::string>& tokens);

  std::vector<Step> steps_;
};

}  // namespace folio
