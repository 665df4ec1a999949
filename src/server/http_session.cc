#include "server/http_session.h"

#include "base/log.h"

namespace folio {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

HttpSession::HttpSession(net::ip::tcp::socket socket, ServerContext& ctx,
                         SessionRegistry& registry)
    : stream_(std::move(socket)),
      ctx_(ctx),
      registry_(registry),
      router_(ctx),
      grace_timer_(stream_.get_executor()) {}

HttpSession::~HttpSession() {
  // Whatever ended the session (error, timeout, shutdown), live engine requests die with it.
  release_engine_requests();
  registry_.remove(this);
}

void HttpSession::start() {
  registry_.add(shared_from_this());
  // The disconnect watch peeks without blocking; the sync 100-continue write never waits.
  beast::error_code ignored;
  stream_.socket().non_blocking(true, ignored);
  stream_.socket().set_option(net::ip::tcp::no_delay(true), ignored);
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_header(); });
}

void HttpSession::shutdown(std::chrono::milliseconds grace) {
  net::post(stream_.get_executor(), [self = shared_from_this(), grace] {
    if (self->shutting_down_ || self->closed_) return;
    self->shutting_down_ = true;
    self->keep_alive_ = false;
    if (self->gen_) {
      self->grace_timer_.expires_after(grace);
      self->grace_timer_.async_wait(
          [self](beast::error_code ec) { self->on_grace_expired(ec); });
    } else if (!self->reply_ && !self->write_in_progress_ && !self->stream_started_) {
      self->close();  // idle or mid-read: nothing owed to the client
    }  // else: the response being written closes the connection when done
  });
}

void HttpSession::read_header() {
  if (closed_) return;
  if (shutting_down_) return close();
  parser_.emplace();
  parser_->header_limit(64 * 1024);
  parser_->body_limit(ctx_.config.max_request_bytes);
  stream_.expires_after(std::chrono::milliseconds(ctx_.config.header_timeout_ms));
  http::async_read_header(stream_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                            self->on_header(ec);
                          });
}

void HttpSession::on_header(beast::error_code ec) {
  if (ec == http::error::body_limit) {
    keep_alive_ = false;
    return send_reply(error_reply({413, "The request body exceeds the limit of " +
                                            std::to_string(ctx_.config.max_request_bytes) +
                                            " bytes", "", "request_too_large"}));
  }
  if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
      ec == net::error::operation_aborted || ec == net::error::connection_reset ||
      ec == net::error::eof) {
    return close();
  }
  if (ec) {
    keep_alive_ = false;
    return send_reply(error_reply(bad_request("Malformed HTTP request: " + ec.message())));
  }
  if (parser_->is_done()) return dispatch();
  read_body();
}

void HttpSession::read_body() {
  const auto& req = parser_->get();
  if (beast::iequals(req[http::field::expect], "100-continue")) {
    // Clients that wait for it (curl) would otherwise stall a second before sending.
    static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    beast::error_code ignored;
    stream_.expires_after(std::chrono::milliseconds(ctx_.config.write_timeout_ms));
    net::write(stream_.socket(), net::buffer(kContinue), ignored);
  }
  stream_.expires_after(std::chrono::milliseconds(ctx_.config.body_timeout_ms));
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) {
                     self->on_body(ec);
                   });
}

void HttpSession::on_body(beast::error_code ec) {
  if (ec == http::error::body_limit) {
    keep_alive_ = false;
    return send_reply(error_reply({413, "The request body exceeds the limit of " +
                                            std::to_string(ctx_.config.max_request_bytes) +
                                            " bytes", "", "request_too_large"}));
  }
  if (ec) return close();  // timeout (slow or truncated body), reset, eof
  dispatch();
}

void HttpSession::dispatch() {
  Request req = parser_->release();
  keep_alive_ = req.keep_alive() && !shutting_down_;
  chunked_ = req.version() >= 11;
  HttpRequestInfo info;
  info.method = std::string(req.method_string());
  info.target = std::string(req.target());
  info.body = std::move(req.body());
  info.authorization = std::string(req[http::field::authorization]);
  info.x_api_key = std::string(req["x-api-key"]);
  RouteResult r = router_.route(info);
  if (r.reply) return send_reply(std::move(*r.reply));
  start_generation(std::move(*r.plan));
}

void HttpSession::send_reply(HttpReply reply) {
  if (closed_) return;
  ctx_.metrics.record_http_status(reply.status);
  reply_ = std::make_shared<http::response<http::string_body>>(
      static_cast<http::status>(reply.status), 11);
  reply_->set(http::field::server, "folio");
  reply_->set(http::field::content_type, reply.content_type);
  for (const auto& [k, v] : reply.headers) reply_->set(k, v);
  reply_->body() = std::move(reply.body);
  reply_->keep_alive(keep_alive_);
  reply_->prepare_payload();
  stream_.expires_after(std::chrono::milliseconds(ctx_.config.write_timeout_ms));
  http::async_write(stream_, *reply_,
                    [self = shared_from_this()](beast::error_code ec, size_t) {
                      self->on_reply_written(ec);
                    });
}

void HttpSession::on_reply_written(beast::error_code ec) {
  reply_.reset();
  if (ec) return close();
  after_response();
}

void HttpSession::after_response() {
  if (!keep_alive_ || shutting_down_) return close();
  if (watching_) {
    // The disconnect watch must end before a read may start on the socket.
    read_after_watch_ = true;
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
    return;
  }
  read_header();
}

void HttpSession::close() {
  if (closed_) return;
  closed_ = true;
  release_engine_requests();
  grace_timer_.cancel();
  beast::error_code ignored;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
}

}  // namespace folio
