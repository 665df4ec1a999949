// ApiError: an OpenAI-shaped error, {"error": {"message", "type", "param", "code"}}, with the
// HTTP status it travels under. Every failure a client can cause becomes one of these.
#pragma once

#include <string>

#include "base/status.h"

namespace folio {

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string param;  // the offending request field, empty = null
  std::string code;   // a short machine-readable tag, empty = null

  // "invalid_request_error" (4xx), "authentication_error" (401), "server_error" (5xx).
  std::string type() const;
  // The JSON body, compact, always valid UTF-8.
  std::string body() const;
};

ApiError bad_request(std::string message, std::string param = "", std::string code = "");
// Maps an engine / tokenizer Status: kInvalidArgument -> 400, kNotFound -> 404,
// kResourceExhausted -> 503, kUnimplemented -> 501, everything else -> 500.
ApiError error_from_status(const Status& status);

}  // namespace folio
