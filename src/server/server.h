// Server: the OpenAI-compatible HTTP front end over an EngineClient.
//
//   Server server(config, engine);   // config.validate() first
//   Status st = server.run();        // blocks until stop() (or SIGINT/SIGTERM if enabled)
//
// or start() + wait() when the caller needs port() first (port 0 = ephemeral). A few I/O
// threads (config.num_io_threads) run every connection asynchronously; none ever waits on the
// engine. stop() is thread-safe and idempotent: it closes the listener, lets in-flight
// requests finish for up to shutdown_grace_ms, aborts the rest (finish_reason "abort"),
// closes every connection, and makes run()/wait() return. The engine must outlive the Server.
#pragma once

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include <boost/asio.hpp>

#include "engine/engine_client.h"
#include "server/server_config.h"
#include "server/server_context.h"
#include "server/session_registry.h"

namespace folio {

class Listener;

class Server {
 public:
  Server(const ServerConfig& config, EngineClient& engine);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  Status run();    // start() + wait()
  Status start();  // binds and starts the I/O threads; returns at once
  void wait();     // until stopped
  void stop();     // thread-safe, idempotent; also async-signal-free (posts only)
  uint16_t port() const { return port_; }
  const ServerContext& context() const { return ctx_; }

 private:
  void begin_shutdown();
  void poll_drained(std::chrono::steady_clock::time_point hard_deadline);

  // Declared before ioc_: handlers destroyed with ioc_ may still hold sessions, whose
  // destructors use the context and the registry.
  ServerContext ctx_;
  SessionRegistry registry_;
  boost::asio::io_context ioc_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::shared_ptr<Listener> listener_;
  std::unique_ptr<boost::asio::signal_set> signals_;
  std::unique_ptr<boost::asio::steady_timer> drain_timer_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stopping_{false};
  uint16_t port_ = 0;
};

}  // namespace folio
