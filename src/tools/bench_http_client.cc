#include "tools/bench_http_client.h"

#include <memory>
#include <optional>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace folio::tools {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr size_t kMaxErrorBody = 2048;  // of a non-200 body, kept for the error message

// One request: connect -> write -> read header -> read body pieces until done. Owned by the
// handlers in flight (shared_from_this); on_done fires once, from finish().
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(net::io_context& ioc, StreamingRequest request, StreamCallbacks cb)
      : stream_(ioc), cb_(std::move(cb)), timeout_(request.timeout) {
    req_ = http::request<http::string_body>(request.get ? http::verb::get : http::verb::post,
                                            request.target, 11);
    req_.set(http::field::host, request.host_header);
    req_.set(http::field::user_agent, "folio-bench");
    if (!request.get) {
      req_.set(http::field::content_type, "application/json");
      req_.set(http::field::accept, "text/event-stream");
      req_.body() = std::move(request.body);
    }
    for (const auto& [k, v] : request.headers) req_.set(k, v);
    req_.prepare_payload();
    parser_.body_limit(std::uint64_t{1} << 40);  // pieces are taken out as they arrive
    parser_.eager(true);
  }

  void start(const Endpoints& endpoints) {
    // One deadline for the whole exchange: tcp_stream applies it to every later operation.
    stream_.expires_after(timeout_);
    stream_.async_connect(endpoints, [self = shared_from_this()](beast::error_code ec,
                                                                 const tcp::endpoint&) {
      if (ec) return self->finish(self->io_error("connect", ec));
      self->write();
    });
  }

 private:
  void write() {
    http::async_write(stream_, req_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->finish(self->io_error("write", ec));
      self->read_header();
    });
  }

  void read_header() {
    http::async_read_header(stream_, buffer_, parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->finish(self->io_error("read header", ec));
      self->status_ = self->parser_.get().result_int();
      self->read_body();
    });
  }

  void read_body() {
    if (!take_body()) return finish(Status());  // the caller has what it wanted
    if (parser_.is_done()) return finish(outcome());
    http::async_read_some(stream_, buffer_, parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) {
        self->take_body();
        return self->finish(self->io_error("read body", ec));
      }
      self->read_body();
    });
  }

  // Hands the body bytes decoded so far to the caller (200) or keeps the start of an error body.
  // False: the caller wants no more.
  bool take_body() {
    std::string& body = parser_.get().body();
    if (body.empty()) return true;
    bool more = true;
    if (status_ == 200) {
      if (cb_.on_body) more = cb_.on_body(body);
    } else if (error_body_.size() < kMaxErrorBody) {
      error_body_.append(body.substr(0, kMaxErrorBody - error_body_.size()));
    }
    body.clear();  // the string_body reader appends at the current size, so this is safe
    return more;
  }

  Status outcome() const {
    if (status_ == 200) return Status();
    return internal_error("HTTP " + std::to_string(status_) + ": " + error_body_);
  }

  Status io_error(const char* what, beast::error_code ec) const {
    if (ec == beast::error::timeout)
      return resource_exhausted(std::string(what) + ": timed out after " +
                                std::to_string(timeout_.count()) + " ms");
    return internal_error(std::string(what) + ": " + ec.message());
  }

  void finish(Status status) {
    if (done_) return;
    done_ = true;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    if (cb_.on_done) cb_.on_done(std::move(status));
  }

  beast::tcp_stream stream_;
  http::request<http::string_body> req_;
  beast::flat_buffer buffer_;
  http::response_parser<http::string_body> parser_;
  StreamCallbacks cb_;
  std::chrono::milliseconds timeout_;
  int status_ = 0;
  std::string error_body_;
  bool done_ = false;
};

}  // namespace

Result<BaseUrl> parse_base_url(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    if (url.substr(0, 8) == "https://")
      return unimplemented("--base-url: https is not supported; use http://");
    return invalid_argument("--base-url must look like http://HOST:PORT, got '" +
                            std::string(url) + "'");
  }
  std::string_view rest = url.substr(kScheme.size());
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string path = slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
  while (!path.empty() && path.back() == '/') path.pop_back();
  BaseUrl out;
  out.base_path = path;
  out.port = "80";
  if (!authority.empty() && authority[0] == '[') {  // [v6]:port
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return invalid_argument("--base-url: unclosed '['");
    out.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (!authority.empty()) {
      if (authority[0] != ':') return invalid_argument("--base-url: expected ':' after ']'");
      out.port = std::string(authority.substr(1));
    }
  } else {
    const size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) out.port = std::string(authority.substr(colon + 1));
  }
  if (out.host.empty()) return invalid_argument("--base-url names no host");
  if (out.port.empty() || out.port.size() > 5 ||
      out.port.find_first_not_of("0123456789") != std::string::npos || std::stoi(out.port) < 1 ||
      std::stoi(out.port) > 65535)
    return invalid_argument("--base-url: bad port '" + out.port + "'");
  return out;
}

Result<Endpoints> resolve(net::io_context& ioc, const BaseUrl& url) {
  tcp::resolver resolver(ioc);
  beast::error_code ec;
  Endpoints eps = resolver.resolve(url.host, url.port, ec);
  if (ec) return not_found("cannot resolve " + url.host + ":" + url.port + ": " + ec.message());
  return eps;
}

void start_streaming_request(net::io_context& ioc, const Endpoints& endpoints,
                             StreamingRequest request, StreamCallbacks callbacks) {
  std::make_shared<Session>(ioc, std::move(request), std::move(callbacks))->start(endpoints);
}

}  // namespace folio::tools
