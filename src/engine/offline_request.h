// Offline requests for `folio generate` and `folio bench`: parsing one JSONL input line (vLLM's
// SamplingParams field names) and writing one output line. Bad lines become a per-line error,
// never an abort.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/sampling_params.h"
#include "engine/engine_client.h"

namespace folio {

struct OfflineRequest {
  std::vector<int32_t> prompt_token_ids;
  std::optional<std::string> prompt;  // text, to be tokenized by the caller
  SamplingParams params;
  int priority = 0;
  std::string cache_salt;
};

// Parses one input line. Errors name the field and the problem.
Result<OfflineRequest> parse_offline_request(const std::string& line);

// The output line of a finished request: {"index", "prompt_token_ids", "outputs": [...],
// "prompt_logprobs"} (plus "prompt"/"text" when the tokenizer is known).
nlohmann::json format_offline_output(int index, const std::vector<int32_t>& prompt_token_ids,
                                     const std::optional<std::string>& prompt,
                                     const RequestOutput& merged, const SamplingParams& params,
                                     bool with_text);

// {"index": i, "error": message}
nlohmann::json format_offline_error(int index, const std::string& message);

}  // namespace folio
