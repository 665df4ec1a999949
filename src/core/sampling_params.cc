#include "core/sampling_params.h"

#include <cmath>

namespace folio {

Status SamplingParams::validate(int max_logprobs, int vocab_size) const {
  auto bad = [](const std::string& m) { return invalid_argument(m); };
  if (n < 1) return bad("n must be at least 1, got " + std::to_string(n));
  if (!(temperature >= 0.0f) || !std::isfinite(temperature))
    return bad("temperature must be a finite number >= 0, got " + std::to_string(temperature));
  if (!(top_p > 0.0f && top_p <= 1.0f))
    return bad("top_p must be in (0, 1], got " + std::to_string(top_p));
  if (top_k < -1) return bad("top_k must be -1 (off) or positive, got " + std::to_string(top_k));
  if (!(min_p >= 0.0f && min_p <= 1.0f))
    return bad("min_p must be in [0, 1], got " + std::to_string(min_p));
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty))
    return bad("repetition_penalty must be > 0, got " + std::to_string(repetition_penalty));
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    return bad("presence_penalty must be in [-2, 2], got " + std::to_string(presence_penalty));
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    return bad("frequency_penalty must be in [-2, 2], got " + std::to_string(frequency_penalty));
  if (max_tokens < 1) return bad("max_tokens must be at least 1, got " + std::to_string(max_tokens));
  if (min_tokens < 0 || min_tokens > max_tokens)
    return bad("min_tokens must be in [0, max_tokens], got " + std::to_string(min_tokens));
  if (logprobs && (*logprobs < 0 || *logprobs > max_logprobs))
    return bad("logprobs must be in [0, " + std::to_string(max_logprobs) + "], got " +
               std::to_string(*logprobs));
  if (prompt_logprobs && (*prompt_logprobs < 0 || *prompt_logprobs > max_logprobs))
    return bad("prompt_logprobs must be in [0, " + std::to_string(max_logprobs) + "], got " +
               std::to_string(*prompt_logprobs));
  for (int32_t id : stop_token_ids)
    if (id < 0 || id >= vocab_size)
      return bad("stop_token_ids holds " + std::to_string(id) + ", outside the vocabulary [0, " +
                 std::to_string(vocab_size) + ")");
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0 || id >= vocab_size)
      return bad("logit_bias names token " + std::to_string(id) + ", outside the vocabulary");
    if (!std::isfinite(bias)) return bad("logit_bias values must be finite");
  }
  for (const auto& s : stop)
    if (s.empty()) return bad("stop strings must not be empty");
  if (use_beam_search && temperature != 0.0f && has_temperature)
    return bad("beam search requires temperature 0 (or unset)");
  if (!(length_penalty == length_penalty)) return bad("length_penalty must be a number");
  return Status();
}

}  // namespace folio
