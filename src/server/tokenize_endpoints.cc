// POST /tokenize and POST /detokenize with vLLM's request and response shapes.
#include "server/chat_request.h"
#include "server/request_common.h"
#include "server/response_format.h"
#include "server/router.h"

namespace folio {
namespace {

using nlohmann::json;

MaybeError tokenize_body(const json& body, const ServerContext& ctx, std::vector<int32_t>& ids) {
  ParseContext pctx{ctx.config, ctx.engine, ctx.info, ctx.served_model};
  FOLIO_API_TRY(check_model(body, pctx));
  const bool chat = body.contains("messages");
  bool add_special = !chat;
  FOLIO_API_TRY(read_bool(body, "add_special_tokens", add_special));
  std::string text;
  if (chat) {
    ChatTemplateInput in;
    FOLIO_API_TRY(normalize_messages(body, in.messages));
    FOLIO_API_TRY(read_bool(body, "add_generation_prompt", in.add_generation_prompt));
    FOLIO_API_TRY(read_bool(body, "continue_final_message", in.continue_final_message));
    if (in.continue_final_message) in.add_generation_prompt = false;
    FOLIO_API_TRY(read_object(body, "chat_template_kwargs", in.kwargs));
    auto rendered = ctx.engine.apply_chat_template(in);
    if (!rendered.ok()) return error_from_status(rendered.status());
    text = std::move(rendered).value();
  } else {
    if (!has_field(body, "prompt")) return bad_request("'prompt' is required", "prompt");
    FOLIO_API_TRY(read_string(body, "prompt", text));
  }
  auto encoded = ctx.engine.encode(text, add_special);
  if (!encoded.ok()) return error_from_status(encoded.status());
  ids = std::move(encoded).value();
  return std::nullopt;
}

}  // namespace

HttpReply handle_tokenize(const std::string& body_text, const ServerContext& ctx) {
  json body;
  if (auto e = parse_json_body(body_text, body)) return error_reply(*e);
  std::vector<int32_t> ids;
  if (auto e = tokenize_body(body, ctx, ids)) return error_reply(*e);
  json out = {{"count", ids.size()},
              {"max_model_len", ctx.info.max_model_len},
              {"tokens", ids},
              {"token_strs", nullptr}};
  return json_reply(dump_json(out));
}

HttpReply handle_detokenize(const std::string& body_text, const ServerContext& ctx) {
  json body;
  if (auto e = parse_json_body(body_text, body)) return error_reply(*e);
  ParseContext pctx{ctx.config, ctx.engine, ctx.info, ctx.served_model};
  if (auto e = check_model(body, pctx)) return error_reply(*e);
  if (!has_field(body, "tokens") || !body["tokens"].is_array())
    return error_reply(bad_request("'tokens' must be a list of token ids", "tokens", "invalid_type"));
  std::vector<int32_t> ids;
  for (const auto& t : body["tokens"]) {
    int64_t id = 0;
    if (!json_to_int64(t, id))
      return error_reply(bad_request("'tokens' must be a list of token ids", "tokens",
                                     "invalid_type"));
    if (id < 0 || id >= ctx.info.vocab_size)
      return error_reply(bad_request("token id " + std::to_string(id) +
                                         " is outside the vocabulary [0, " +
                                         std::to_string(ctx.info.vocab_size) + ")",
                                     "tokens", "invalid_value"));
    ids.push_back(static_cast<int32_t>(id));
  }
  auto text = ctx.engine.decode(ids, /*skip_special_tokens=*/false);
  if (!text.ok()) return error_reply(error_from_status(text.status()));
  return json_reply(dump_json({{"prompt", std::move(text).value()}}));
}

}  // namespace folio
