#include "server/chat_request.h"

namespace folio {
namespace {

using nlohmann::json;

ApiError messages_error(const std::string& message, const char* code = "invalid_value") {
  return bad_request(message, "messages", code);
}

MaybeError flatten_content(const json& content, size_t i, json& out) {
  const std::string where = "messages[" + std::to_string(i) + "].content";
  if (content.is_null() || content.is_string()) {
    out = content.is_null() ? json("") : content;
    return std::nullopt;
  }
  if (!content.is_array())
    return messages_error(where + " must be a string or a list of parts", "invalid_type");
  std::string text;
  for (const auto& part : content) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      return messages_error(where + " parts must be objects with a 'type'", "invalid_type");
    if (part["type"] != "text")
      return messages_error(where + ": content parts of type '" +
                            part["type"].get<std::string>() + "' are not supported",
                            "unsupported");
    if (!part.contains("text") || !part["text"].is_string())
      return messages_error(where + " text parts need a string 'text'", "invalid_type");
    if (!text.empty()) text += "\n";
    text += part["text"].get<std::string>();
  }
  out = text;
  return std::nullopt;
}

MaybeError parse_logprobs(const json& body, const ServerConfig& config, GenerationPlan& plan,
                          SamplingParams& params) {
  bool logprobs = false;
  FOLIO_API_TRY(read_bool(body, "logprobs", logprobs));
  std::optional<int> top;
  FOLIO_API_TRY(read_int(body, "top_logprobs", top));
  if (top && !logprobs)
    return bad_request("'top_logprobs' requires 'logprobs' to be true", "top_logprobs",
                       "invalid_value");
  if (top && (*top < 0 || *top > config.max_logprobs))
    return bad_request("'top_logprobs' must be in [0, " + std::to_string(config.max_logprobs) +
                           "], got " + std::to_string(*top), "top_logprobs", "invalid_value");
  if (logprobs) params.logprobs = top.value_or(0);
  plan.logprobs = params.logprobs;
  return std::nullopt;
}

MaybeError parse_template_input(const json& body, ChatTemplateInput& in) {
  FOLIO_API_TRY(normalize_messages(body, in.messages));
  FOLIO_API_TRY(read_bool(body, "add_generation_prompt", in.add_generation_prompt));
  FOLIO_API_TRY(read_bool(body, "continue_final_message", in.continue_final_message));
  if (in.add_generation_prompt && in.continue_final_message && body.contains("add_generation_prompt"))
    return bad_request("'continue_final_message' and 'add_generation_prompt' cannot both be true",
                       "continue_final_message", "invalid_value");
  if (in.continue_final_message) in.add_generation_prompt = false;
  FOLIO_API_TRY(read_object(body, "chat_template_kwargs", in.kwargs));
  if (has_field(body, "tools") && body["tools"].is_array() && !body["tools"].empty())
    return bad_request("'tools' are not supported", "tools", "unsupported");
  json format;
  FOLIO_API_TRY(read_object(body, "response_format", format));
  if (format.contains("type") && !(format["type"].is_string() && format["type"] == "text"))
    return bad_request("only the 'text' response_format is supported", "response_format",
                       "unsupported");
  return std::nullopt;
}

}  // namespace

MaybeError normalize_messages(const json& body, json& out) {
  if (!has_field(body, "messages")) return messages_error("'messages' is required");
  const json& msgs = body.at("messages");
  if (!msgs.is_array()) return messages_error("'messages' must be a list", "invalid_type");
  if (msgs.empty()) return messages_error("'messages' must not be empty");
  out = json::array();
  for (size_t i = 0; i < msgs.size(); ++i) {
    const json& m = msgs[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return messages_error(where + " must be an object", "invalid_type");
    if (!m.contains("role") || !m["role"].is_string())
      return messages_error(where + ".role must be a string", "invalid_type");
    json flat = m;
    json content;
    FOLIO_API_TRY(flatten_content(m.contains("content") ? m["content"] : json(), i, content));
    flat["content"] = std::move(content);
    out.push_back(std::move(flat));
  }
  return std::nullopt;
}

MaybeError parse_chat_request(const json& body, const ParseContext& ctx, GenerationPlan& plan) {
  plan.kind = ApiKind::kChat;
  plan.model = ctx.served_model;
  plan.created = unix_now();
  plan.response_id = make_response_id("chatcmpl-");
  FOLIO_API_TRY(check_model(body, ctx));

  GenerateRequest req;
  FOLIO_API_TRY(parse_sampling_fields(body, ctx.config, req.params));
  std::optional<int> max_tokens;
  FOLIO_API_TRY(read_int(body, "max_tokens", max_tokens));
  FOLIO_API_TRY(read_int(body, "max_completion_tokens", max_tokens));  // wins when both set
  FOLIO_API_TRY(parse_logprobs(body, ctx.config, plan, req.params));
  plan.n = req.params.n;
  FOLIO_API_TRY(parse_stream_and_extras(body, plan, req.priority, req.cache_salt));

  ChatTemplateInput input;
  FOLIO_API_TRY(parse_template_input(body, input));
  auto rendered = ctx.engine.apply_chat_template(input);
  if (!rendered.ok()) return error_from_status(rendered.status());
  bool add_special = false;  // the template already holds BOS and friends
  FOLIO_API_TRY(read_bool(body, "add_special_tokens", add_special));
  auto ids = ctx.engine.encode(*rendered, add_special);
  if (!ids.ok()) return error_from_status(ids.status());
  req.prompt_token_ids = std::move(ids).value();
  FOLIO_API_TRY(finalize_prompt(ctx, req.prompt_token_ids, max_tokens, "messages", req.params));
  req.request_id = plan.response_id + "-0";
  plan.requests.push_back(std::move(req));
  return std::nullopt;
}

}  // namespace folio
