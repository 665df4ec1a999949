// folio generate: offline generation of a JSONL file of requests (or one --prompt) through the
// whole engine (scheduler, KV manager, sampler), many requests in flight at once. Output lines
// come in input order; a bad input line gets an {"index", "error"} line and the rest still run.
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "base/log.h"
#include "engine/offline_request.h"
#include "tools/commands.h"
#include "tools/engine_flags.h"

namespace folio::tools {
namespace {

using nlohmann::json;

struct GenerateFlags {
  EngineFlags engine;
  std::string input, output, prompt, stats_json;
  int max_tokens = 16;
  float temperature = 0.0f;
};

json stats_json(const EngineCore& e) {
  const auto& s = e.scheduler().stats();
  const auto& kv = e.kv();
  return {{"num_requests", e.counters().num_requests},
          {"prompt_tokens", e.counters().prompt_tokens},
          {"generated_tokens", e.counters().generated_tokens},
          {"num_steps", s.num_steps},
          {"num_preemptions", s.num_preemptions},
          {"num_swapped_out_blocks", s.num_swapped_out_blocks},
          {"prefix_cache_hit_tokens", kv.stats().prefix_hit_tokens},
          {"prefix_cache_query_tokens", kv.stats().prefix_query_tokens},
          {"kv_cache_mode", e.config().kv_mode == KvCacheMode::kToken ? "token" : "paged"},
          {"kv_cache_dtype", kv_cache_dtype_name(e.config().kv_cache_dtype)},
          {"kv_block_size", kv.block_size()},
          {"kv_num_blocks", kv.num_total_blocks()},
          {"kv_blocks_free_at_end", kv.num_free_blocks()},
          {"peak_kv_blocks_used", s.peak_blocks_used},
          {"kv_slot_utilization", s.kv_slot_utilization()},
          {"kv_blocks_saved_by_sharing", kv.stats().blocks_shared},
          {"kv_blocks_allocated", kv.stats().blocks_allocated}};
}

// Reads the requests: one per line of --input (or stdin), or the single --prompt.
std::vector<std::string> read_lines(const GenerateFlags& f) {
  std::vector<std::string> lines;
  if (!f.prompt.empty()) {
    lines.push_back(
        json{{"prompt", f.prompt}, {"max_tokens", f.max_tokens}, {"temperature", f.temperature}}
            .dump());
    return lines;
  }
  std::ifstream file;
  std::istream* in = &std::cin;
  if (!f.input.empty() && f.input != "-") {
    file.open(f.input);
    in = &file;
  }
  std::string line;
  while (std::getline(*in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(line);
  return lines;
}

int run_generate(const GenerateFlags& f) {
  if (std::string m = check_model_source(f.engine); !m.empty()) {
    std::cerr << "folio generate: " << m << "\n";
    return 2;
  }
  if (!f.input.empty() && f.input != "-" && !std::ifstream(f.input)) {
    std::cerr << "folio generate: cannot open --input " << f.input << "\n";
    return 2;
  }
  auto config = to_engine_config(f.engine);
  if (!config.ok()) {
    std::cerr << "folio generate: " << config.status().message() << "\n";
    return 2;
  }
  auto engine_or = load_engine(f.engine.load, *config);
  if (!engine_or.ok()) {
    std::cerr << "folio generate: " << engine_or.status().message() << "\n";
    return 2;
  }
  EngineCore& engine = **engine_or;
  const Tokenizer* tok = engine.tokenizer();
  std::vector<std::string> lines = read_lines(f);
  std::map<int, json> results;
  std::map<int, RequestOutput> finals;
  std::map<int, OfflineRequest> requests;
  for (int i = 0; i < static_cast<int>(lines.size()); ++i) {
    auto req = parse_offline_request(lines[i]);
    if (!req.ok()) {
      results[i] =
          format_offline_error(i, "line " + std::to_string(i + 1) + ": " + req.status().message());
      continue;
    }
    if (req->prompt_token_ids.empty()) {
      if (!tok) {
        results[i] = format_offline_error(
            i, "\"prompt\" needs a tokenizer.json in the model folder (or --tokenizer DIR)");
        continue;
      }
      req->prompt_token_ids = tok->encode(*req->prompt, /*add_special_tokens=*/true);
    }
    GenerateRequest g;
    g.request_id = std::to_string(i);
    g.prompt_token_ids = req->prompt_token_ids;
    g.params = req->params;
    g.priority = req->priority;
    g.cache_salt = req->cache_salt;
    Status st = engine.add_request(
        std::move(g), [&finals, i](RequestOutput&& o) { finals[i] = std::move(o); },
        /*final_only=*/true);
    if (!st.ok()) {
      results[i] = format_offline_error(i, st.message());
      continue;
    }
    requests[i] = std::move(*req);
  }
  while (engine.has_unfinished()) {
    Status st = engine.step();
    if (!st.ok()) {
      std::cerr << "folio generate: engine failed: " << st.message() << "\n";
      return 1;
    }
  }
  log_info("done: " + engine.scheduler().summary());
  for (auto& [i, out] : finals) {
    const OfflineRequest& r = requests[i];
    if (!out.error.ok())
      results[i] = format_offline_error(i, out.error.message());
    else
      results[i] =
          format_offline_output(i, r.prompt_token_ids, r.prompt, out, r.params, tok != nullptr);
  }
  std::ofstream file;
  std::ostream* os = &std::cout;
  if (!f.output.empty() && f.output != "-") {
    file.open(f.output);
    if (!file) {
      std::cerr << "folio generate: cannot write --output " << f.output << "\n";
      return 2;
    }
    os = &file;
  }
  for (auto& [i, j] : results)
    *os << j.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  if (!f.stats_json.empty()) std::ofstream(f.stats_json) << stats_json(engine).dump(2) << "\n";
  return 0;
}

}  // namespace

void register_generate(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<GenerateFlags>();
  auto* cmd = app.add_subcommand("generate", "Offline generation over a JSONL file of requests");
  // --model, or --model-config with --load-format dummy (as the bench commands): with
  // --tokenizer, dummy weights can then take text prompts without a model folder.
  add_engine_flags(cmd, flags->engine);
  auto* input = cmd->add_option("--input", flags->input, "JSONL requests (default stdin)");
  cmd->add_option("--prompt", flags->prompt, "a single text prompt instead of --input")
      ->excludes(input);
  cmd->add_option("--output", flags->output, "JSONL results (default stdout)");
  cmd->add_option("--max-tokens", flags->max_tokens, "with --prompt")->check(CLI::PositiveNumber);
  cmd->add_option("--temperature", flags->temperature, "with --prompt (default 0: greedy)");
  cmd->add_option("--stats-json", flags->stats_json, "write run statistics here at exit");
  cmd->callback([flags, &exit_code] { exit_code = run_generate(*flags); });
}

}  // namespace folio::tools
