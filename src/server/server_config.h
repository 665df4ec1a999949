// ServerConfig: everything the HTTP layer needs, validated once by Server's constructor caller
// (validate()) and then passed down by const reference.
#pragma once

#include <string>

#include "base/status.h"

namespace folio {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;                // 0 = pick an ephemeral port (see Server::port())
  std::string served_model_name;  // empty = the engine's model name
  std::string api_key;            // empty = no authentication
  int max_queued_requests = 1024; // admitted requests that have not produced output yet
  size_t max_request_bytes = 8u << 20;
  int max_n = 128;
  int max_stop_strings = 64;
  int max_logprobs = 20;
  int num_io_threads = 4;
  size_t output_channel_capacity = 64;  // queued outputs per request before they coalesce
  int header_timeout_ms = 15000;   // waiting for a request's headers (also keep-alive idle)
  int body_timeout_ms = 60000;     // reading a request's body
  int write_timeout_ms = 60000;    // one write to a client that does not read
  int shutdown_grace_ms = 5000;    // stop(): time in-flight requests get to finish
  int retry_after_s = 1;           // the Retry-After of a 503
  bool handle_signals = false;     // run() stops on SIGINT / SIGTERM

  Status validate() const;
};

}  // namespace folio
