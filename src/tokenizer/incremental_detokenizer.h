// IncrementalDetokenizer: streaming decode of generated ids, one id at a time.
//
// Each step() returns the text that has become final with that id (possibly ""), and finish()
// returns the rest. Invariants:
//   - every returned piece is valid UTF-8 (an incomplete character is held back, never split);
//   - the concatenation of all pieces equals Tokenizer::decode(all ids, skip_special_tokens)
//     exactly, including the leading-space handling of SentencePiece decoders (Strip/Metaspace),
//     byte-fallback runs (held until the run ends, because HF turns a whole run into U+FFFDs
//     when any byte of it is invalid) and a trailing incomplete sequence (U+FFFD at finish()).
// It runs the tokenizer's decoder chain as a pipeline of streaming stages, each holding only
// the little state it needs, so a step costs O(length of the new token). prime() feeds context
// (e.g. the prompt) whose text is not returned, so the first generated word keeps its space.
//
// Thread contract: one instance per sequence, used from one thread at a time; it borrows the
// Tokenizer, which must outlive it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace folio {

class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens);

  // Feeds `ids` and discards the text they produce.
  void prime(std::span<const int32_t> ids);
  std::string step(int32_t id);
  // Flushes everything held back. The detokenizer must not be stepped afterwards.
  std::string finish();

 private:
  // Per-stage streaming state; which fields a stage uses depends on its decoder step.
  struct Stage {
    const Decoder::Step* step = nullptr;
    std::string pending;   // ByteLevel: incomplete UTF-8 bytes; ByteFallback: the byte run
    std::string held;      // Strip: trailing strip characters that may still be removed
    int held_chars = 0;
    int leading_left = 0;  // Strip: leading characters that may still be removed
    int64_t tokens_seen = 0;
    bool emitted = false;  // fusing stages: the first output starts the single fused token
  };

  // Passes `text` into stage `i` (i == stages_.size(): the output). `new_token`: the text
  // starts a new token for that stage.
  void push(size_t i, std::string_view text, bool new_token);
  void flush(size_t i);
  void push_byte_level(size_t i, Stage& s, std::string_view text);
  void push_byte_fallback(size_t i, Stage& s, std::string_view text, bool new_token);
  void release_byte_run(size_t i, Stage& s);
  void push_strip(size_t i, Stage& s, std::string_view text, bool new_token);
  void push_metaspace(size_t i, Stage& s, std::string_view text, bool new_token);
  void emit_fused(size_t i, Stage& s, std::string_view text);

  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::vector<Stage> stages_;
  std::string out_;
};

}  // namespace folio
