// A Server on 127.0.0.1:<ephemeral> over a FakeEngine, for the live tests.
#pragma once

#include <memory>

#include "fake_engine.h"
#include "server/server.h"
#include "test_client.h"

namespace folio::testing {

inline ServerConfig test_config() {
  ServerConfig c;
  c.host = "127.0.0.1";
  c.port = 0;
  c.num_io_threads = 2;
  c.max_request_bytes = 4096;
  c.header_timeout_ms = 300;
  c.body_timeout_ms = 300;
  c.shutdown_grace_ms = 200;
  return c;
}

struct LiveServer {
  explicit LiveServer(ServerConfig config = test_config(), FakeEngineOptions opts = {})
      : engine(opts), server(std::make_unique<Server>(config, engine)) {
    Status st = server->start();
    if (!st.ok()) ADD_FAILURE() << st.to_string();
    port = server->port();
  }
  ~LiveServer() {
    server->stop();
    server->wait();
  }
  FakeEngine engine;
  std::unique_ptr<Server> server;
  uint16_t port = 0;
};

}  // namespace folio::testing
