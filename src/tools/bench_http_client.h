// A small streaming HTTP/1.1 client for the serving benchmark (Boost.Beast over Asio): many
// requests (POSTs of completions; a GET of the server's /metrics) in flight on one io_context, each
// on its own connection, each bounded by a deadline, the response body handed over as it arrives
// (chunked transfer decoded) so the caller can timestamp every server-sent event. Plain http only
// (benchmarks run beside the server).
//
// Threading: a request's callbacks run on the io_context's thread(s); start_streaming_request()
// must be called from that thread or before run().
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio.hpp>

#include "base/status.h"

namespace folio::tools {

struct BaseUrl {
  std::string host;       // "127.0.0.1", "localhost", "::1" (no brackets)
  std::string port;       // "8000"; "80" when the URL names none
  std::string base_path;  // "" or "/prefix" (no trailing slash)
};

// "http://HOST[:PORT][/PATH]"; https and other schemes are refused with a clear message.
Result<BaseUrl> parse_base_url(std::string_view url);

using Endpoints = boost::asio::ip::tcp::resolver::results_type;
// Resolves once, before the benchmark starts (no DNS inside the timed window).
Result<Endpoints> resolve(boost::asio::io_context& ioc, const BaseUrl& url);

struct StreamingRequest {
  std::string target;  // "/v1/completions" (base_path already prefixed)
  std::string host_header;
  std::string body;  // a POST's JSON body
  bool get = false;  // a GET without a body instead of the POST (the server's /metrics)
  std::vector<std::pair<std::string, std::string>> headers;  // e.g. Authorization
  std::chrono::milliseconds timeout{600000};                // the whole exchange
};

struct StreamCallbacks {
  // Each piece of the decoded body of a 200 response, as it arrives. Returning false ends the
  // exchange there: the connection is closed (a streaming server sees its client leave) and
  // on_done gets ok.
  std::function<bool(std::string_view)> on_body;
  // Exactly once, last: ok when the 200 response ended cleanly; otherwise what went wrong
  // ("HTTP 400: {...}", "connect: Connection refused", "timed out after 5000 ms").
  std::function<void(Status)> on_done;
};

void start_streaming_request(boost::asio::io_context& ioc, const Endpoints& endpoints,
                             StreamingRequest request, StreamCallbacks callbacks);

}  // namespace folio::tools
