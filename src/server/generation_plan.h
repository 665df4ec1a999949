// GenerationPlan: a parsed, validated /v1/completions or /v1/chat/completions request — the
// engine requests to submit plus how to shape the response. Plain data, built by the request
// parsers (completion_request.h, chat_request.h) and consumed by Generation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_client.h"

namespace folio {

enum class ApiKind { kCompletion, kChat };

struct GenerationPlan {
  ApiKind kind = ApiKind::kCompletion;
  std::string response_id;  // "cmpl-<hex>" / "chatcmpl-<hex>"; sub-requests append "-<i>"
  std::string model;        // the served model name, echoed in every response
  int64_t created = 0;      // unix seconds
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage: a final usage chunk
  bool continuous_usage = false;  // stream_options.continuous_usage_stats: usage on every chunk
  bool echo = false;              // completions: the prompt text precedes the completion
  // Completions: logprobs=K. Chat: logprobs=true with top_logprobs=K. nullopt = none.
  std::optional<int> logprobs;
  int n = 1;  // choices per prompt; choice index = prompt_index * n + j
  // One engine request per prompt (completions may carry a batch of prompts).
  std::vector<GenerateRequest> requests;
  std::vector<std::string> echo_text;  // per prompt, when echo
};

}  // namespace folio
