#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace folio {

std::string ApiError::type() const {
  if (http_status == 401) return "authentication_error";
  if (http_status >= 500) return "server_error";
  return "invalid_request_error";
}

std::string ApiError::body() const {
  nlohmann::json err = {{"message", message},
                        {"type", type()},
                        {"param", param.empty() ? nlohmann::json() : nlohmann::json(param)},
                        {"code", code.empty() ? nlohmann::json() : nlohmann::json(code)}};
  nlohmann::json out = {{"error", std::move(err)}};
  // Messages may quote user bytes; `replace` keeps the body valid UTF-8 whatever they were.
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ApiError bad_request(std::string message, std::string param, std::string code) {
  return ApiError{400, std::move(message), std::move(param), std::move(code)};
}

ApiError error_from_status(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument: return bad_request(status.message());
    case StatusCode::kNotFound: return ApiError{404, status.message(), "", "not_found"};
    case StatusCode::kResourceExhausted: return ApiError{503, status.message(), "", "overloaded"};
    case StatusCode::kUnimplemented: return ApiError{501, status.message(), "", "unsupported"};
    default: return ApiError{500, status.message(), "", "internal_error"};
  }
}

}  // namespace folio
