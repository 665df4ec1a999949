// Parsing shared by the two generation endpoints: the sampling fields (vLLM's names), the model
// check, stream options and the final per-prompt checks (context length, vocabulary, caps,
// SamplingParams::validate). All return MaybeError (nullopt = ok) and never throw.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine_client.h"
#include "server/generation_plan.h"
#include "server/json_fields.h"
#include "server/server_config.h"

namespace folio {

// What the parsers need besides the body; `engine` is used for tokenization only.
struct ParseContext {
  const ServerConfig& config;
  const EngineClient& engine;
  EngineInfo info;
  std::string served_model;  // config.served_model_name or the engine's model name
};

// Parses a body into a JSON object: 400 on malformed JSON, invalid UTF-8 or a non-object.
MaybeError parse_json_body(std::string_view body, nlohmann::json& out);

// `model` absent is the served model; any other name is a 404.
MaybeError check_model(const nlohmann::json& body, const ParseContext& ctx);

// Every sampling field except max_tokens and logprobs (their names differ by endpoint).
MaybeError parse_sampling_fields(const nlohmann::json& body, const ServerConfig& config,
                                 SamplingParams& params);

// stream, stream_options (only allowed with stream), priority, cache_salt.
MaybeError parse_stream_and_extras(const nlohmann::json& body, GenerationPlan& plan,
                                   int& priority, std::string& cache_salt);

// Checks one prompt against the vocabulary and the context, fills max_tokens when the request
// left it unset (`max_tokens` nullopt: the rest of the context), and validates the params.
// `what` names the prompt in messages ("messages" or "prompt").
MaybeError finalize_prompt(const ParseContext& ctx, const std::vector<int32_t>& prompt,
                           std::optional<int> max_tokens, const char* what,
                           SamplingParams& params);

// "cmpl-" + 32 hex digits of randomness.
std::string make_response_id(const char* prefix);
int64_t unix_now();

}  // namespace folio
