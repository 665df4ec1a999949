// Router: method + path -> an immediate reply, or a GenerationPlan to run. Checks the API key
// (every path but /health), parses and validates generation requests, and admits them against
// max_queued_requests (503 + Retry-After when full). Called on I/O threads; never waits on the
// engine (it only tokenizes and reads stats snapshots).
#pragma once

#include <optional>

#include "server/generation_plan.h"
#include "server/http_types.h"
#include "server/server_context.h"

namespace folio {

struct RouteResult {
  std::optional<HttpReply> reply;      // answer this now
  std::optional<GenerationPlan> plan;  // or generate; plan.requests.size() slots are admitted
};

class Router {
 public:
  explicit Router(ServerContext& ctx) : ctx_(ctx) {}
  RouteResult route(const HttpRequestInfo& req) const;

 private:
  RouteResult generate(const HttpRequestInfo& req, bool chat) const;
  HttpReply health() const;
  HttpReply models() const;
  HttpReply metrics() const;

  ServerContext& ctx_;
};

// Handlers of POST /tokenize and POST /detokenize (vLLM's shapes), in tokenize_endpoints.cc.
HttpReply handle_tokenize(const std::string& body, const ServerContext& ctx);
HttpReply handle_detokenize(const std::string& body, const ServerContext& ctx);

}  // namespace folio
