// POST /v1/completions: JSON body -> GenerationPlan (one engine request per prompt).
// Prompts: a string, a list of strings, a list of token ids or a list of token-id lists.
// `suffix` is refused; `echo` prefixes the prompt text; `logprobs` is the top-K count.
#pragma once

#include <nlohmann/json.hpp>

#include "server/generation_plan.h"
#include "server/request_common.h"

namespace folio {

MaybeError parse_completion_request(const nlohmann::json& body, const ParseContext& ctx,
                                    GenerationPlan& plan);

}  // namespace folio
