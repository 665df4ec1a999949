// HttpSession: one client connection (HTTP/1.1, keep-alive), on its own strand.
//
// Reads a request under deadlines (headers, then body: a slowloris client is cut off), routes
// it, and either writes a reply or runs a Generation: the engine requests are submitted with
// one bounded OutputChannel each, whose notify posts on_engine_output() to this strand, so the
// engine thread never waits on the socket and no I/O thread waits on the engine. Streaming
// responses are SSE over chunked transfer encoding. While generating, a zero-byte read watch
// notices a client that hangs up (queued, prefilling, streaming or not); its requests are then
// aborted in the engine at once. Any path that destroys the session with requests still live
// aborts them too (destructor).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "server/generation.h"
#include "server/http_types.h"
#include "server/router.h"
#include "server/server_context.h"
#include "server/session_registry.h"

namespace folio {

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(boost::asio::ip::tcp::socket socket, ServerContext& ctx, SessionRegistry& registry);
  ~HttpSession();

  void start();
  // Thread-safe. Idle: close now. Generating: finish within `grace`, then abort the rest with
  // finish_reason "abort" and close after the response.
  void shutdown(std::chrono::milliseconds grace);

 private:
  using Request = boost::beast::http::request<boost::beast::http::string_body>;

  // Reading and plain replies (http_session.cc).
  void read_header();
  void on_header(boost::beast::error_code ec);
  void read_body();
  void on_body(boost::beast::error_code ec);
  void dispatch();
  void send_reply(HttpReply reply);
  void on_reply_written(boost::beast::error_code ec);
  void after_response();
  void close();

  // Generation (http_session_generate.cc).
  void start_generation(GenerationPlan plan);
  void on_engine_output();
  void end_generation_with_error();
  void abort_generation(bool client_gone);
  void queue_stream(const std::string& data, bool last);
  void flush();
  void on_flushed(boost::beast::error_code ec);
  void watch_disconnect();
  void on_watch(boost::beast::error_code ec);
  void release_engine_requests();
  void on_grace_expired(boost::beast::error_code ec);

  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  ServerContext& ctx_;
  SessionRegistry& registry_;
  Router router_;
  boost::asio::steady_timer grace_timer_;
  std::shared_ptr<boost::beast::http::response<boost::beast::http::string_body>> reply_;

  bool keep_alive_ = true;
  bool closed_ = false;
  bool shutting_down_ = false;

  // The generation in flight, if any.
  std::unique_ptr<Generation> gen_;
  std::vector<std::shared_ptr<OutputChannel>> channels_;
  bool chunked_ = true;        // HTTP/1.1 streams chunked; HTTP/1.0 streams until close
  bool stream_started_ = false;  // SSE headers queued
  bool stream_done_ = false;     // the terminating chunk is queued
  std::string pending_;          // bytes queued behind the write in progress
  std::string writing_;          // bytes of the write in progress
  bool write_in_progress_ = false;
  bool watching_ = false;        // the disconnect watch is pending
  bool read_after_watch_ = false;  // start the next read once the watch completes
};

}  // namespace folio
