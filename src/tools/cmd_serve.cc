// folio serve: the OpenAI-compatible HTTP server over the engine. With no --model it serves the
// bundled tiny model, so the README's run command shows the real thing.
#include <iostream>

#include "base/file_util.h"
#include "base/log.h"
#include "engine/async_engine.h"
#include "server/server.h"
#include "tools/commands.h"
#include "tools/engine_flags.h"

namespace folio::tools {
namespace {

struct ServeFlags {
  EngineFlags engine;
  ServerConfig server;
  std::string api_key_file;
  std::string chat_template_file;
};

std::string default_model_dir() {
  if (file_exists("models/tiny_llama3/config.json")) return "models/tiny_llama3";
  return FOLIO_DEFAULT_MODEL_DIR;
}

Result<std::optional<ChatTemplate>> load_chat_template(const ServeFlags& f) {
  if (!f.chat_template_file.empty()) {
    FOLIO_ASSIGN_OR_RETURN(std::string src, read_file(f.chat_template_file));
    FOLIO_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::parse(src));
    return std::optional<ChatTemplate>(std::move(t));
  }
  const std::string& dir = f.engine.load.tokenizer_source();
  if (dir.empty()) return std::optional<ChatTemplate>();  // dummy weights, no --tokenizer
  return ChatTemplate::from_model_dir(dir);
}

int run_serve(ServeFlags f) {
  if (f.engine.load.model_dir.empty() && f.engine.load.load_format != "dummy")
    f.engine.load.model_dir = default_model_dir();
  if (!f.api_key_file.empty()) {
    auto key = read_file(f.api_key_file);
    if (!key.ok()) {
      std::cerr << "folio serve: --api-key-file: " << key.status().message() << "\n";
      return 2;
    }
    std::string k = *key;
    while (!k.empty() && (k.back() == '\n' || k.back() == '\r' || k.back() == ' ')) k.pop_back();
    f.server.api_key = k;
  }
  f.server.handle_signals = true;
  if (Status st = f.server.validate(); !st.ok()) {
    std::cerr << "folio serve: " << st.message() << "\n";
    return 2;
  }
  auto config = to_engine_config(f.engine);
  if (!config.ok()) {
    std::cerr << "folio serve: " << config.status().message() << "\n";
    return 2;
  }
  config->usage = UsageContext::kServer;  // the serving defaults (engine/batch_defaults.h)
  auto tmpl = load_chat_template(f);
  if (!tmpl.ok()) {
    std::cerr << "folio serve: " << tmpl.status().message() << "\n";
    return 2;
  }
  auto core = load_engine(f.engine.load, *config);
  if (!core.ok()) {
    std::cerr << "folio serve: " << core.status().message() << "\n";
    return 2;
  }
  const int64_t kv_tokens = (*core)->kv_capacity_tokens();
  const int max_len = (*core)->max_model_len();
  const KvCacheDtype kv_dtype = (*core)->config().kv_cache_dtype;
  std::string name =
      f.server.served_model_name.empty() ? f.engine.load.model_dir : f.server.served_model_name;
  AsyncEngine engine(std::move(*core), name, std::move(*tmpl));
  Server server(f.server, engine);
  if (Status st = server.start(); !st.ok()) {
    std::cerr << "folio serve: " << st.message() << "\n";
    return 2;
  }
  log_info("serving " + name + " on http://" + f.server.host + ":" + std::to_string(server.port()) +
           " (device " + f.engine.load.device + ", KV capacity " + std::to_string(kv_tokens) +
           " tokens = " + std::to_string(kv_tokens / std::max(1, max_len)) + " sequences of " +
           std::to_string(max_len) + ", KV cache dtype " + kv_cache_dtype_name(kv_dtype) + ")");
  server.wait();
  engine.shutdown();
  log_info("stopped");
  return 0;
}

}  // namespace

void register_serve(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<ServeFlags>();
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server");
  add_engine_flags(cmd, f->engine);
  cmd->add_option("--host", f->server.host, "address to listen on");
  cmd->add_option("--port", f->server.port, "port (0: any free one)")->check(CLI::Range(0, 65535));
  cmd->add_option("--served-model-name", f->server.served_model_name, "model name in the API");
  auto* key = cmd->add_option("--api-key", f->server.api_key, "require this bearer key");
  cmd->add_option("--api-key-file", f->api_key_file, "read the key from a file")->excludes(key);
  cmd->add_option("--chat-template", f->chat_template_file, "Jinja chat template file");
  cmd->add_option("--max-queued-requests", f->server.max_queued_requests,
                  "waiting requests before 503")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-request-bytes", f->server.max_request_bytes, "largest body (413 above)");
  cmd->add_option("--num-io-threads", f->server.num_io_threads, "HTTP I/O threads")
      ->check(CLI::Range(1, 64));
  cmd->callback([f, &exit_code] { exit_code = run_serve(*f); });
}

}  // namespace folio::tools
