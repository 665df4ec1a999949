// JSON pieces of OpenAI responses: usage, logprobs (the legacy completions shape and the chat
// shape), stop reasons, prompt logprobs (vLLM's shape), SSE framing. Token text comes from a
// TokenText function (EngineClient::decode of one id). Logprobs of -inf are clamped to -9999,
// as vLLM does, because JSON has no infinity.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine_client.h"

namespace folio {

using TokenText = std::function<std::string(int32_t)>;

nlohmann::json usage_json(int prompt_tokens, int completion_tokens, int cached_tokens);
nlohmann::json stop_reason_json(const StopReason& r);
nlohmann::json finish_reason_json(const std::optional<std::string>& r);

// Legacy completions logprobs: {"tokens", "token_logprobs", "top_logprobs", "text_offset"}.
// Appends positions; `text_offset` counts bytes from the start of the choice's text.
class CompletionLogprobs {
 public:
  explicit CompletionLogprobs(TokenText token_text) : token_text_(std::move(token_text)) {}
  // A prompt position (echo): `p` is nullopt for the first one, which has no logprob.
  void add_prompt(int32_t token_id, const std::optional<PositionLogprobs>& p);
  void add(const PositionLogprobs& p);
  void skip_text(size_t bytes) { offset_ += bytes; }  // text without logprobs (echo sans them)
  nlohmann::json take();  // the object built so far; resets the lists, keeps the offset
  bool empty() const { return tokens_.empty(); }

 private:
  TokenText token_text_;
  size_t offset_ = 0;
  nlohmann::json tokens_ = nlohmann::json::array();
  nlohmann::json token_logprobs_ = nlohmann::json::array();
  nlohmann::json top_logprobs_ = nlohmann::json::array();
  nlohmann::json text_offset_ = nlohmann::json::array();
};

// Chat logprobs: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}.
nlohmann::json chat_logprobs_json(const std::vector<PositionLogprobs>& positions,
                                  const TokenText& token_text);

// vLLM's prompt_logprobs: [null, {"<id>": {"logprob", "rank", "decoded_token"}, ...}, ...].
nlohmann::json prompt_logprobs_json(const std::vector<std::optional<PositionLogprobs>>& p,
                                    const TokenText& token_text);

// "data: <compact json>\n\n", invalid UTF-8 replaced.
std::string sse_event(const nlohmann::json& j);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";
// Compact JSON with invalid UTF-8 replaced by U+FFFD (never throws).
std::string dump_json(const nlohmann::json& j);

}  // namespace folio
