#include "server/server_config.h"

namespace folio {

Status ServerConfig::validate() const {
  auto positive = [](int v, const char* name) -> Status {
    if (v < 1) return invalid_argument(std::string(name) + " must be at least 1");
    return Status();
  };
  if (port < 0 || port > 65535) return invalid_argument("port must be in [0, 65535]");
  FOLIO_RETURN_IF_ERROR(positive(max_queued_requests, "max_queued_requests"));
  FOLIO_RETURN_IF_ERROR(positive(max_n, "max_n"));
  FOLIO_RETURN_IF_ERROR(positive(max_stop_strings, "max_stop_strings"));
  FOLIO_RETURN_IF_ERROR(positive(num_io_threads, "num_io_threads"));
  FOLIO_RETURN_IF_ERROR(positive(header_timeout_ms, "header_timeout_ms"));
  FOLIO_RETURN_IF_ERROR(positive(body_timeout_ms, "body_timeout_ms"));
  FOLIO_RETURN_IF_ERROR(positive(write_timeout_ms, "write_timeout_ms"));
  if (max_logprobs < 0) return invalid_argument("max_logprobs must be >= 0");
  if (max_request_bytes < 64) return invalid_argument("max_request_bytes must be at least 64");
  if (shutdown_grace_ms < 0) return invalid_argument("shutdown_grace_ms must be >= 0");
  return Status();
}

}  // namespace folio
