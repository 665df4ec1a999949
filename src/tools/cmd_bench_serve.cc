// folio bench serve: the online serving benchmark (B4) against a running OpenAI-compatible
// server, `folio serve` or any other, like `vllm bench serve`.
#include <sys/resource.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>

#include "tools/bench_commands.h"
#include "tools/bench_meta.h"
#include "tools/bench_serve.h"

namespace folio::tools {
namespace {

struct ServeBenchFlags {
  ServeBenchConfig bench;
  std::string request_rate = "inf";
  std::string workload, output_json, gpu_name = "unknown";
  int input_len = 0, output_len = 0, num_prompts = 0;
};

Result<double> parse_rate(const std::string& s) {
  if (s == "inf" || s == "Inf" || s == "INF") return std::numeric_limits<double>::infinity();
  size_t used = 0;
  double r = 0;
  try {
    r = std::stod(s, &used);
  } catch (...) {
    used = 0;
  }
  if (used != s.size() || !std::isfinite(r) || r <= 0)
    return invalid_argument("--request-rate must be a positive number or inf, got '" + s + "'");
  return r;
}

// A thousand streams at once need a thousand sockets; the soft limit is often 1024.
void raise_open_file_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

void print_result(const nlohmann::json& j) {
  std::printf("============ Serving Benchmark Result ============\n");
  std::printf("%-40s %d\n", "Successful requests:", j["completed"].get<int>());
  std::printf("%-40s %d\n", "Failed requests:", j["failed"].get<int>());
  std::printf("%-40s %.2f\n", "Benchmark duration (s):", j["duration"].get<double>());
  std::printf("%-40s %lld\n", "Total input tokens:", j["total_input_tokens"].get<long long>());
  std::printf("%-40s %lld\n", "Total generated tokens:", j["total_output_tokens"].get<long long>());
  std::printf("%-40s %.2f\n", "Request throughput (req/s):", j["request_throughput"].get<double>());
  std::printf("%-40s %.2f\n", "Output token throughput (tok/s):", j["output_throughput"].get<double>());
  std::printf("%-40s %.2f\n", "Total token throughput (tok/s):",
              j["total_token_throughput"].get<double>());
  for (const char* m : {"ttft", "tpot", "itl", "e2el"}) {
    const std::string k = std::string(m) + "_ms";
    std::printf("%-6s mean %10.2f ms   median %10.2f ms   p99 %10.2f ms\n", m,
                j["mean_" + k].get<double>(), j["median_" + k].get<double>(),
                j["p99_" + k].get<double>());
  }
  for (const auto& e : j["errors"]) std::printf("error: %s\n", e.get<std::string>().c_str());
}

int run(ServeBenchFlags f) {
  auto rate = parse_rate(f.request_rate);
  if (!rate.ok()) {
    std::cerr << "folio bench serve: " << rate.status().message() << "\n";
    return 2;
  }
  f.bench.request_rate = *rate;
  Result<std::vector<WorkloadItem>> items = invalid_argument("give --workload FILE, or --input-len and --output-len");
  if (!f.workload.empty()) items = load_workload(f.workload, f.num_prompts);
  else if (f.input_len > 0 && f.output_len > 0)
    items = fixed_workload(f.input_len, f.output_len, f.num_prompts > 0 ? f.num_prompts : 1000);
  if (!items.ok()) {
    std::cerr << "folio bench serve: " << items.status().message() << "\n";
    return 2;
  }
  f.bench.workload = std::move(*items);
  raise_open_file_limit();
  auto result = run_serve_benchmark(f.bench);
  if (!result.ok()) {
    std::cerr << "folio bench serve: " << result.status().message() << "\n";
    return 2;
  }
  nlohmann::json j = serve_metrics_json(result->records, result->duration_s);
  print_result(j);
  if (const auto& pc = result->prefix_cache) {
    j["prefix_cache_query_tokens"] = static_cast<int64_t>(pc->queries);
    j["prefix_cache_hit_tokens"] = static_cast<int64_t>(pc->hits);
    std::printf("Prefix cache hit tokens:                 %.0f of %.0f queried\n", pc->hits,
                pc->queries);
    if (auto w = prefix_cache_warning(*pc, j["total_input_tokens"].get<int64_t>()))
      std::cerr << "folio bench serve: warning: " << *w << "\n";
  }
  if (!f.output_json.empty()) {
    j.update(run_metadata(f.gpu_name));
    j["benchmark"] = "serve";
    j["base_url"] = f.bench.base_url;
    j["request_rate"] = std::isinf(f.bench.request_rate) ? nlohmann::json("inf")
                                                         : nlohmann::json(f.bench.request_rate);
    j["max_concurrency"] = f.bench.max_concurrency;
    j["num_prompts"] = static_cast<int>(f.bench.workload.size());
    if (Status st = write_json_file(f.output_json, j); !st.ok()) {
      std::cerr << "folio bench serve: " << st.message() << "\n";
      return 2;
    }
  }
  return j["completed"].get<int>() > 0 ? 0 : 1;
}

}  // namespace

void register_bench_serve(CLI::App* bench, int& exit_code) {
  auto f = std::make_shared<ServeBenchFlags>();
  auto* cmd = bench->add_subcommand("serve", "Online serving load generator (vllm bench serve)");
  cmd->add_option("--base-url", f->bench.base_url, "http://HOST:PORT of the server")->required();
  cmd->add_option("--model", f->bench.model, "model name to send (default: the server's)");
  cmd->add_option("--api-key", f->bench.api_key, "bearer key");
  cmd->add_option("--request-rate", f->request_rate, "requests/s (Poisson), or inf: all at once");
  cmd->add_option("--max-concurrency", f->bench.max_concurrency, "requests in flight (0: no cap)")
      ->check(CLI::NonNegativeNumber);
  auto* wl = cmd->add_option("--workload", f->workload, "JSONL of {\"input_len\", \"output_len\"}");
  cmd->add_option("--input-len", f->input_len, "prompt tokens (no --workload)")
      ->check(CLI::PositiveNumber)->excludes(wl);
  cmd->add_option("--output-len", f->output_len, "output tokens (no --workload)")
      ->check(CLI::PositiveNumber)->excludes(wl);
  cmd->add_option("--num-prompts", f->num_prompts, "requests (default: the workload, or 1000)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", f->bench.seed, "seed of prompts and arrival times");
  cmd->add_option("--vocab-size", f->bench.vocab_size,
                  "prompt ids are drawn from [0, V); at most the server's vocabulary")
      ->check(CLI::Range(2, 1 << 24));
  cmd->add_option("--request-timeout", f->bench.request_timeout_s, "seconds per request")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-duration", f->bench.max_duration_s, "seconds for the whole run")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--gpu-name", f->gpu_name, "the server's device, recorded in the JSON");
  cmd->add_option("--output-json", f->output_json, "write the result here");
  cmd->callback([f, &exit_code] { exit_code = run(*f); });
}

}  // namespace folio::tools
