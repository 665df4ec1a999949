// POST /v1/chat/completions: JSON body -> GenerationPlan with one engine request. Messages
// are flattened (text parts joined) and rendered by EngineClient::apply_chat_template; a
// template error becomes a 400 carrying its message. max_completion_tokens wins over
// max_tokens; unset means the rest of the context. logprobs is a bool with top_logprobs.
#pragma once

#include <nlohmann/json.hpp>

#include "server/generation_plan.h"
#include "server/request_common.h"

namespace folio {

MaybeError parse_chat_request(const nlohmann::json& body, const ParseContext& ctx,
                              GenerationPlan& plan);

// The messages as the chat template receives them: roles checked, content flattened to a
// string (list content: text parts joined by "\n"; other part types are refused).
MaybeError normalize_messages(const nlohmann::json& body, nlohmann::json& out);

}  // namespace folio
