// Listener: accepts connections on the configured address and starts an HttpSession for each,
// each on its own strand of the shared io_context.
#pragma once

#include <boost/asio.hpp>

#include "base/status.h"
#include "server/server_context.h"
#include "server/session_registry.h"

namespace folio {

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(boost::asio::io_context& ioc, ServerContext& ctx, SessionRegistry& registry);
  // Binds and listens; an address in use or a bad host is an error Status.
  Status open(const std::string& host, int port);
  uint16_t port() const { return port_; }
  void start();  // the accept loop
  void stop();   // thread-safe: closes the acceptor (posts to it)

 private:
  void accept();

  boost::asio::io_context& ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  ServerContext& ctx_;
  SessionRegistry& registry_;
  uint16_t port_ = 0;
};

}  // namespace folio
