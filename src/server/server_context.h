// ServerContext: the state every part of the server shares, owned by Server and outliving all
// sessions. Members are either immutable after construction or thread-safe themselves.
#pragma once

#include <string>

#include "engine/engine_client.h"
#include "server/admission.h"
#include "server/server_config.h"
#include "server/server_metrics.h"

namespace folio {

struct ServerContext {
  ServerContext(const ServerConfig& cfg, EngineClient& eng)
      : config(cfg),
        engine(eng),
        info(eng.info()),
        served_model(cfg.served_model_name.empty() ? info.model_name : cfg.served_model_name),
        admission(cfg.max_queued_requests) {}

  const ServerConfig config;
  EngineClient& engine;
  const EngineInfo info;
  const std::string served_model;
  ServerMetrics metrics;
  Admission admission;
};

}  // namespace folio
