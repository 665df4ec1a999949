// SamplingParams: what a request asks of decoding, with vLLM's field names and defaults.
// Validated once at the API boundary (validate()), then passed down by const reference.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace folio {

struct SamplingParams {
  int n = 1;                      // sequences returned (beam width for beam search)
  std::optional<int> best_of;     // unused beyond n for now (vLLM V1 dropped it too)
  float temperature = 1.0f;       // 0 = greedy
  float top_p = 1.0f;             // (0, 1]
  int top_k = -1;                 // -1 (or 0) = off
  float min_p = 0.0f;             // [0, 1]
  float repetition_penalty = 1.0f;  // > 0; 1 = off (applied to prompt and output tokens)
  float presence_penalty = 0.0f;    // [-2, 2]
  float frequency_penalty = 0.0f;   // [-2, 2]
  std::map<int32_t, float> logit_bias;  // token id -> added to its logit
  std::optional<uint64_t> seed;   // per-request RNG: same output whatever else is in the batch

  int max_tokens = 16;
  int min_tokens = 0;
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop;  // stop strings, matched across token boundaries
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;

  std::optional<int> logprobs;         // top-K per generated token (chosen always included)
  std::optional<int> prompt_logprobs;  // top-K per prompt token

  bool use_beam_search = false;
  float length_penalty = 1.0f;
  bool early_stopping = false;

  // Which fields the request set explicitly (so generation_config.json defaults fill the rest).
  bool has_temperature = false, has_top_p = false, has_top_k = false, has_min_p = false,
       has_repetition_penalty = false;

  bool greedy() const { return temperature == 0.0f && !use_beam_search; }
  // Checks ranges; `max_logprobs` caps logprobs/prompt_logprobs, `vocab_size` bounds token ids.
  Status validate(int max_logprobs, int vocab_size) const;
};

}  // namespace folio
