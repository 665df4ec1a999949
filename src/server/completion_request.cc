#include "server/completion_request.h"

namespace folio {
namespace {

using nlohmann::json;

ApiError prompt_error(const std::string& message) {
  return bad_request(message, "prompt", "invalid_value");
}

bool is_token_list(const json& v) {
  if (!v.is_array() || v.empty()) return false;
  for (const auto& t : v)
    if (!t.is_number_integer()) return false;
  return true;
}

MaybeError token_list(const json& v, std::vector<int32_t>& out) {
  for (const auto& t : v) {
    int64_t id = 0;
    if (!json_to_int64(t, id) || id < INT32_MIN || id > INT32_MAX)
      return prompt_error("'prompt' token ids must be integers");
    out.push_back(static_cast<int32_t>(id));
  }
  return std::nullopt;
}

MaybeError encode_text(const ParseContext& ctx, const std::string& text, bool add_special,
                       std::vector<int32_t>& out) {
  if (text.empty()) return prompt_error("the prompt is empty");
  auto ids = ctx.engine.encode(text, add_special);
  if (!ids.ok()) return error_from_status(ids.status());
  out = std::move(ids).value();
  return std::nullopt;
}

// Resolves `prompt` into token-id lists, and the prompt texts when echo needs them.
struct Prompt {
  std::vector<int32_t> ids;
  std::optional<std::string> text;  // set for text prompts
};

MaybeError parse_prompts(const json& body, const ParseContext& ctx, bool add_special,
                         std::vector<Prompt>& prompts) {
  if (!has_field(body, "prompt")) return prompt_error("'prompt' is required");
  const json& p = body.at("prompt");
  if (p.is_string()) {
    prompts.push_back({{}, p.get<std::string>()});
    return encode_text(ctx, *prompts.back().text, add_special, prompts.back().ids);
  }
  if (!p.is_array())
    return bad_request("'prompt' must be a string, a list of strings, a list of token ids or a "
                       "list of token-id lists, got " + json_type_name(p), "prompt",
                       "invalid_type");
  if (p.empty()) return prompt_error("the prompt is empty");
  if (is_token_list(p)) {
    prompts.emplace_back();
    return token_list(p, prompts.back().ids);
  }
  for (const auto& item : p) {
    prompts.emplace_back();
    if (item.is_string()) {
      prompts.back().text = item.get<std::string>();
      FOLIO_API_TRY(encode_text(ctx, *prompts.back().text, add_special, prompts.back().ids));
    } else if (item.is_array()) {
      if (item.empty()) return prompt_error("the prompt is empty");
      FOLIO_API_TRY(token_list(item, prompts.back().ids));
    } else {
      return bad_request("'prompt' list items must be strings or token-id lists", "prompt",
                         "invalid_type");
    }
  }
  return std::nullopt;
}

}  // namespace

MaybeError parse_completion_request(const json& body, const ParseContext& ctx,
                                    GenerationPlan& plan) {
  plan.kind = ApiKind::kCompletion;
  plan.model = ctx.served_model;
  plan.created = unix_now();
  plan.response_id = make_response_id("cmpl-");
  FOLIO_API_TRY(check_model(body, ctx));
  if (has_field(body, "suffix"))
    return bad_request("'suffix' is not currently supported", "suffix", "unsupported");

  SamplingParams params;
  FOLIO_API_TRY(parse_sampling_fields(body, ctx.config, params));
  std::optional<int> max_tokens = 16;  // OpenAI's default for completions
  if (has_field(body, "max_tokens")) FOLIO_API_TRY(read_int(body, "max_tokens", max_tokens));
  FOLIO_API_TRY(read_int(body, "logprobs", params.logprobs));
  FOLIO_API_TRY(read_bool(body, "echo", plan.echo));
  // Echo with logprobs reports the prompt's logprobs too, as OpenAI's legacy API does.
  if (plan.echo && params.logprobs && !params.prompt_logprobs)
    params.prompt_logprobs = params.logprobs;
  plan.logprobs = params.logprobs;
  plan.n = params.n;

  int priority = 0;
  std::string cache_salt;
  FOLIO_API_TRY(parse_stream_and_extras(body, plan, priority, cache_salt));
  bool add_special = true;
  FOLIO_API_TRY(read_bool(body, "add_special_tokens", add_special));

  std::vector<Prompt> prompts;
  FOLIO_API_TRY(parse_prompts(body, ctx, add_special, prompts));
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerateRequest req;
    req.request_id = plan.response_id + "-" + std::to_string(i);
    req.params = params;
    req.priority = priority;
    req.cache_salt = cache_salt;
    FOLIO_API_TRY(finalize_prompt(ctx, prompts[i].ids, max_tokens, "prompt", req.params));
    if (plan.echo && prompts[i].text) {
      plan.echo_text.push_back(*prompts[i].text);
    } else if (plan.echo) {
      // Token prompts echo their decoded text, special tokens included.
      auto text = ctx.engine.decode(prompts[i].ids, /*skip_special_tokens=*/false);
      if (!text.ok()) return error_from_status(text.status());
      plan.echo_text.push_back(std::move(text).value());
    }
    req.prompt_token_ids = std::move(prompts[i].ids);
    plan.requests.push_back(std::move(req));
  }
  return std::nullopt;
}

}  // namespace folio
