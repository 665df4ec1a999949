#include "server/server.h"

#include <csignal>

#include "base/log.h"
#include "server/http_session.h"
#include "server/listener.h"

namespace folio {

namespace net = boost::asio;

Server::Server(const ServerConfig& config, EngineClient& engine)
    : ctx_(config, engine), ioc_(config.num_io_threads), work_(net::make_work_guard(ioc_)) {}

Server::~Server() {
  stop();
  wait();
}

Status Server::run() {
  FOLIO_RETURN_IF_ERROR(start());
  wait();
  return Status();
}

Status Server::start() {
  FOLIO_RETURN_IF_ERROR(ctx_.config.validate());
  listener_ = std::make_shared<Listener>(ioc_, ctx_, registry_);
  FOLIO_RETURN_IF_ERROR(listener_->open(ctx_.config.host, ctx_.config.port));
  port_ = listener_->port();
  listener_->start();
  if (ctx_.config.handle_signals) {
    signals_ = std::make_unique<net::signal_set>(ioc_, SIGINT, SIGTERM);
    signals_->async_wait([this](boost::system::error_code ec, int) {
      if (!ec) stop();
    });
  }
  log_info("serving " + ctx_.served_model + " on http://" + ctx_.config.host + ":" +
           std::to_string(port_));
  for (int i = 0; i < ctx_.config.num_io_threads; ++i)
    threads_.emplace_back([this] { ioc_.run(); });
  return Status();
}

void Server::wait() {
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

void Server::stop() {
  if (stopping_.exchange(true)) return;
  if (threads_.empty()) {  // never started: nothing to drain
    work_.reset();
    ioc_.stop();
    return;
  }
  net::post(ioc_, [this] { begin_shutdown(); });
}

void Server::begin_shutdown() {
  log_info("server stopping: no new connections; draining in-flight requests");
  if (signals_) {
    boost::system::error_code ignored;
    signals_->cancel(ignored);
  }
  if (listener_) listener_->stop();
  const auto grace = std::chrono::milliseconds(ctx_.config.shutdown_grace_ms);
  registry_.for_each([grace](const std::shared_ptr<HttpSession>& s) { s->shutdown(grace); });
  // Sessions close themselves once their responses are written; allow a little past the
  // grace period for the last writes, then stop regardless.
  drain_timer_ = std::make_unique<net::steady_timer>(ioc_);
  poll_drained(std::chrono::steady_clock::now() + grace + std::chrono::seconds(2));
}

void Server::poll_drained(std::chrono::steady_clock::time_point hard_deadline) {
  if (registry_.size() == 0 || std::chrono::steady_clock::now() >= hard_deadline) {
    work_.reset();
    ioc_.stop();
    return;
  }
  drain_timer_->expires_after(std::chrono::milliseconds(10));
  drain_timer_->async_wait([this, hard_deadline](boost::system::error_code) {
    poll_drained(hard_deadline);
  });
}

}  // namespace folio

