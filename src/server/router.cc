#include "server/router.h"

#include "server/auth.h"
#include "server/chat_request.h"
#include "server/completion_request.h"
#include "server/response_format.h"

namespace folio {
namespace {

using nlohmann::json;

RouteResult reply(HttpReply r) { return RouteResult{std::move(r), std::nullopt}; }
RouteResult error(const ApiError& e) { return reply(error_reply(e)); }

const char* kVersion = "0.1.0";

}  // namespace

RouteResult Router::route(const HttpRequestInfo& req) const {
  std::string path = req.target.substr(0, req.target.find('?'));
  if (path.size() > 1 && path.back() == '/') path.pop_back();
  if (path == "/health" || path == "/ping") {
    if (req.method != "GET" && req.method != "HEAD") return error({405, "use GET", "", ""});
    return reply(health());
  }
  if (!api_key_accepted(ctx_.config.api_key, req.authorization, req.x_api_key))
    return error({401, "Invalid or missing API key", "", "invalid_api_key"});

  struct Route {
    const char* path;
    const char* method;
  };
  static const Route kRoutes[] = {{"/v1/completions", "POST"}, {"/v1/chat/completions", "POST"},
                                  {"/v1/models", "GET"},       {"/version", "GET"},
                                  {"/metrics", "GET"},         {"/tokenize", "POST"},
                                  {"/detokenize", "POST"}};
  const Route* found = nullptr;
  for (const auto& r : kRoutes)
    if (path == r.path) found = &r;
  if (!found) return error({404, "Not found: " + path, "", "not_found"});
  if (req.method != found->method)
    return error({405, std::string("Method not allowed; use ") + found->method, "",
                  "method_not_allowed"});

  if (path == "/v1/completions") return generate(req, /*chat=*/false);
  if (path == "/v1/chat/completions") return generate(req, /*chat=*/true);
  if (path == "/v1/models") return reply(models());
  if (path == "/version") return reply(json_reply(dump_json({{"version", kVersion}})));
  if (path == "/metrics") return reply(metrics());
  if (path == "/tokenize") return reply(handle_tokenize(req.body, ctx_));
  return reply(handle_detokenize(req.body, ctx_));
}

RouteResult Router::generate(const HttpRequestInfo& req, bool chat) const {
  json body;
  if (auto e = parse_json_body(req.body, body)) return error(*e);
  ParseContext pctx{ctx_.config, ctx_.engine, ctx_.info, ctx_.served_model};
  GenerationPlan plan;
  MaybeError e = chat ? parse_chat_request(body, pctx, plan)
                      : parse_completion_request(body, pctx, plan);
  if (e) return error(*e);
  if (!ctx_.admission.try_acquire(static_cast<int>(plan.requests.size()))) {
    HttpReply r = error_reply({503,
                               "The server is overloaded: " +
                                   std::to_string(ctx_.admission.pending()) +
                                   " requests are waiting. Retry later.",
                               "", "overloaded"});
    r.headers.emplace_back("Retry-After", std::to_string(ctx_.config.retry_after_s));
    return reply(std::move(r));
  }
  return RouteResult{std::nullopt, std::move(plan)};
}

HttpReply Router::health() const {
  if (!ctx_.engine.healthy())
    return error_reply({503, "The engine is not healthy", "", "engine_unhealthy"});
  return HttpReply{200, "text/plain", "", {}};
}

HttpReply Router::models() const {
  json model = {{"id", ctx_.served_model},
                {"object", "model"},
                {"created", 0},
                {"owned_by", "folio"},
                {"root", ctx_.info.model_name},
                {"parent", nullptr},
                {"max_model_len", ctx_.info.max_model_len},
                {"permission", json::array()}};
  return json_reply(dump_json({{"object", "list"}, {"data", json::array({model})}}));
}

HttpReply Router::metrics() const {
  return HttpReply{200, "text/plain; version=0.0.4; charset=utf-8",
                   ctx_.metrics.render(ctx_.engine.stats(), ctx_.served_model), {}};
}

}  // namespace folio
