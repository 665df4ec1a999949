// StopChecker: when a sequence stops, and how much of its text the client may see.
// Tokenizer-agnostic: it sees token ids and the detokenized output text (UTF-8 bytes).
//
// Per new token, the output processor calls, in this order (vLLM V1's engine + detokenizer):
//   1. check_token(token, num_output_tokens): nothing stops while num_output_tokens < min_tokens;
//      then the EOS ids (unless ignore_eos) and stop_token_ids give "stop", then reaching
//      max_tokens gives "length". When EOS / a stop id stopped it, drop_token_text says to leave
//      that token's text out (unless include_stop_str_in_output), as vLLM does.
//   2. append the token's text (if not dropped) and call check_text(text, new_bytes, n): a stop
//      string ending inside the new bytes (so matched across token boundaries) gives "stop" with
//      the string as stop_reason, overriding step 1, and truncate_to cuts the text before it (or
//      after it with include_stop_str_in_output). Stop strings are looked for only once
//      num_output_tokens > min_tokens (vLLM). If several stop strings match, the earliest
//      occurrence wins (vLLM takes the first in list order, which can leak an earlier one).
//   3. when streaming, send the text except its last hold_back(text) bytes, which could still
//      become a stop string (or are an incomplete UTF-8 character).
// Matching is on bytes. Stop strings are valid UTF-8, and UTF-8 is self-synchronizing, so a match
// always starts on a character boundary, even when the string's bytes arrive split across
// tokens; truncation therefore never splits a character.
// EOS ids: the first is the tokenizer's EOS (stop_reason none, as vLLM's eos_token_id); further
// ones (generation_config's extra eos_token_id) act as stop_token_ids (stop_reason = the id),
// as vLLM folds them in. Stateless apart from the params; cheap to copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/sampling_params.h"

namespace folio {

enum class FinishReason { kNone, kStop, kLength };
const char* finish_reason_name(FinishReason reason);  // "", "stop", "length"

struct StopDecision {
  FinishReason finish_reason = FinishReason::kNone;
  std::optional<int32_t> stop_token_id;   // stop_reason when a stop token id stopped it
  std::optional<std::string> stop_string;  // stop_reason when a stop string stopped it
  // The output text must be cut to this many bytes; npos: leave it as is.
  size_t truncate_to = std::string::npos;
  bool drop_token_text = false;  // see check_token

  bool finished() const { return finish_reason != FinishReason::kNone; }
};

class StopChecker {
 public:
  StopChecker(const SamplingParams& params, std::vector<int32_t> eos_token_ids);

  StopDecision check_token(int32_t token_id, size_t num_output_tokens) const;
  // `text`: the whole output text so far, its last `new_bytes` bytes new in this step.
  StopDecision check_text(std::string_view text, size_t new_bytes, size_t num_output_tokens) const;
  // Trailing bytes of `text` a streaming client must not see yet.
  size_t hold_back(std::string_view text) const;

 private:
  std::vector<std::string> stop_;
  std::vector<int32_t> stop_token_ids_;  // including the extra EOS ids unless ignore_eos
  std::optional<int32_t> eos_;           // the primary EOS, unless ignore_eos
  int min_tokens_ = 0;
  int max_tokens_ = 0;
  bool include_stop_str_in_output_ = false;
};

}  // namespace folio
