// Test helper: runs a list of requests through an EngineCore to completion and returns each
// request's final output.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_factory.h"

namespace folio::testing {

struct RunResult {
  std::vector<RequestOutput> outputs;  // by request index
  std::vector<Status> add_status;
};

inline RunResult run_all(EngineCore& engine, const std::vector<GenerateRequest>& reqs) {
  RunResult r;
  r.outputs.resize(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    GenerateRequest g = reqs[i];
    g.request_id = std::to_string(i);
    auto* slot = &r.outputs[i];
    r.add_status.push_back(engine.add_request(
        std::move(g), [slot](RequestOutput&& o) { *slot = std::move(o); }, true));
  }
  for (int guard = 0; engine.has_unfinished() && guard < 1000000; ++guard) {
    Status st = engine.step();
    if (!st.ok()) break;
  }
  return r;
}

inline std::string model_path(const std::string& name) {
  return std::string(FOLIO_TEST_DATA_DIR) + "/models/" + name;
}

inline std::unique_ptr<EngineCore> make_engine(const std::string& model, EngineConfig config) {
  LoadOptions o;
  o.model_dir = model_path(model);
  auto e = load_engine(o, config);
  if (!e.ok()) return nullptr;
  return std::move(*e);
}

// A CPU engine on dummy weights of the config at `config_path` (--model-config), with
// --max-model-len `max_model_len` (0: the model's), --hf-overrides `hf_overrides` and the other
// engine knobs of `c`.
inline Result<std::unique_ptr<EngineCore>> load_dummy_engine(const std::string& config_path,
                                                             int max_model_len = 0,
                                                             const std::string& hf_overrides = "",
                                                             EngineConfig c = EngineConfig()) {
  c.sched.max_model_len = max_model_len;
  LoadOptions o;
  o.device = "cpu";
  o.load_format = "dummy";
  o.model_config_file = config_path;
  o.hf_overrides = hf_overrides;
  return load_engine(o, c);
}

}  // namespace folio::testing
