#include "server/listener.h"

#include "base/log.h"
#include "server/http_session.h"

namespace folio {

namespace net = boost::asio;
using net::ip::tcp;

Listener::Listener(net::io_context& ioc, ServerContext& ctx, SessionRegistry& registry)
    : ioc_(ioc), acceptor_(net::make_strand(ioc)), ctx_(ctx), registry_(registry) {}

Status Listener::open(const std::string& host, int port) {
  boost::system::error_code ec;
  auto address = net::ip::make_address(host, ec);
  if (ec) return invalid_argument("bad listen address '" + host + "': " + ec.message());
  tcp::endpoint endpoint(address, static_cast<uint16_t>(port));
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    return invalid_argument("cannot listen on " + host + ":" + std::to_string(port) + ": " +
                            ec.message());
  port_ = acceptor_.local_endpoint().port();
  return Status();
}

void Listener::start() {
  net::dispatch(acceptor_.get_executor(), [self = shared_from_this()] { self->accept(); });
}

void Listener::stop() {
  net::post(acceptor_.get_executor(), [self = shared_from_this()] {
    boost::system::error_code ignored;
    self->acceptor_.close(ignored);
  });
}

void Listener::accept() {
  acceptor_.async_accept(
      net::make_strand(ioc_), [self = shared_from_this()](boost::system::error_code ec,
                                                          tcp::socket socket) {
        if (!self->acceptor_.is_open()) return;  // stopped
        if (ec) {
          // Out of descriptors and the like: log, back off briefly, keep accepting.
          log_warn("accept failed: " + ec.message());
          auto timer = std::make_shared<net::steady_timer>(self->acceptor_.get_executor(),
                                                           std::chrono::milliseconds(50));
          timer->async_wait([self, timer](boost::system::error_code) { self->accept(); });
          return;
        }
        std::make_shared<HttpSession>(std::move(socket), self->ctx_, self->registry_)->start();
        self->accept();
      });
}

}  // namespace folio
