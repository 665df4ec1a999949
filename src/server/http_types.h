// Plain request/reply types between the Beast session and the router, so routing and
// handlers are testable without sockets.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "server/api_error.h"

namespace folio {

struct HttpRequestInfo {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and optional query
  std::string body;
  std::string authorization;  // raw header values, "" when absent
  std::string x_api_key;
};

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
};

inline HttpReply json_reply(std::string body, int status = 200) {
  return HttpReply{status, "application/json", std::move(body), {}};
}
inline HttpReply error_reply(const ApiError& e) { return json_reply(e.body(), e.http_status); }

}  // namespace folio
