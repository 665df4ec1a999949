// folio bench throughput: offline throughput of one engine over a workload (B1, B2, M1).
#include <cstdio>
#include <iostream>

#include "base/log.h"
#include "tools/bench_commands.h"
#include "tools/bench_meta.h"
#include "tools/bench_throughput.h"
#include "tools/bench_workload.h"

namespace folio::tools {
namespace {

struct ThroughputFlags {
  EngineFlags engine;
  std::string workload, output_json;
  int input_len = 0, output_len = 0, num_prompts = 0, n = 1;
};

Result<std::vector<WorkloadItem>> build_workload(const ThroughputFlags& f) {
  if (!f.workload.empty()) return load_workload(f.workload, f.num_prompts);
  if (f.input_len <= 0 || f.output_len <= 0)
    return invalid_argument("give --workload FILE, or --input-len and --output-len");
  return fixed_workload(f.input_len, f.output_len, f.num_prompts > 0 ? f.num_prompts : 1000);
}

void print_result(const ThroughputResult& r, const std::string& device) {
  const double t = r.elapsed_s;
  std::printf("Throughput (%s): %.2f requests/s, %.2f total tokens/s, %.2f output tokens/s\n",
              device.c_str(), (r.num_requests - r.num_failed) / t,
              (r.prompt_tokens + r.output_tokens) / t, r.output_tokens / t);
  std::printf("Requests: %d (%d failed), prompt tokens: %lld, output tokens: %lld", r.num_requests,
              r.num_failed, static_cast<long long>(r.prompt_tokens),
              static_cast<long long>(r.output_tokens));
  if (r.n > 1) std::printf(" (%d sequences per request)", r.n);
  std::printf("\n");
  std::printf("Wall time: %.3f s over %lld steps\n", t, static_cast<long long>(r.num_steps));
  std::printf("KV slot utilization: %.1f%%, peak KV blocks: %d of %d (block size %d, KV cache %s)\n",
              100.0 * r.kv_slot_utilization, r.peak_kv_blocks_used, r.kv_num_blocks,
              r.kv_block_size, r.kv_cache_dtype.c_str());
  std::printf("Preemptions: %lld, peak concurrent sequences: %d\n",
              static_cast<long long>(r.num_preemptions), r.peak_running_sequences);
  if (r.prefix_cache_hit_tokens > 0)
    std::printf("Prefix cache: %lld of %lld prompt tokens hit at admission; %lld tokens run\n",
                static_cast<long long>(r.prefix_cache_hit_tokens),
                static_cast<long long>(r.prompt_tokens),
                static_cast<long long>(r.scheduled_tokens));
}

int run(const ThroughputFlags& f) {
  if (std::string m = check_model_source(f.engine); !m.empty()) {
    std::cerr << "folio bench throughput: " << m << "\n";
    return 2;
  }
  auto items = build_workload(f);
  if (!items.ok()) {
    std::cerr << "folio bench throughput: " << items.status().message() << "\n";
    return 2;
  }
  auto config = to_engine_config(f.engine);
  if (!config.ok()) {
    std::cerr << "folio bench throughput: " << config.status().message() << "\n";
    return 2;
  }
  auto engine = load_engine(f.engine.load, *config);
  if (!engine.ok()) {
    std::cerr << "folio bench throughput: " << engine.status().message() << "\n";
    return 2;
  }
  auto r = run_throughput(**engine, *items, f.engine.seed, f.n);
  if (!r.ok()) {
    std::cerr << "folio bench throughput: " << r.status().message() << "\n";
    return r.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  const std::string device = (*engine)->executor().device_name();
  print_result(*r, device);
  const nlohmann::json host_loop = host_loop_json((*engine)->counters());
  print_host_loop(host_loop);
  if (!f.output_json.empty()) {
    nlohmann::json j = throughput_json(*r);
    j.update(run_metadata(device));
    j["benchmark"] = "throughput";
    j["host_loop"] = host_loop;
    j["workload"] = f.workload.empty() ? "fixed" : f.workload;
    if (Status st = write_json_file(f.output_json, j); !st.ok()) {
      std::cerr << "folio bench throughput: " << st.message() << "\n";
      return 2;
    }
  }
  return 0;
}

}  // namespace

void register_bench_throughput(CLI::App* bench, int& exit_code) {
  auto f = std::make_shared<ThroughputFlags>();
  auto* cmd = bench->add_subcommand("throughput", "Offline throughput: all requests at once");
  add_engine_flags(cmd, f->engine);
  auto* wl = cmd->add_option("--workload", f->workload, "JSONL of {\"input_len\", \"output_len\"}");
  cmd->add_option("--input-len", f->input_len, "prompt tokens per request (no --workload)")
      ->check(CLI::PositiveNumber)->excludes(wl);
  cmd->add_option("--output-len", f->output_len, "output tokens per request (no --workload)")
      ->check(CLI::PositiveNumber)->excludes(wl);
  cmd->add_option("--num-prompts", f->num_prompts,
                  "requests (default: the whole workload, or 1000)")->check(CLI::PositiveNumber);
  cmd->add_option("--n", f->n,
                  "sequences sampled per request (parallel sampling; default 1): they share the "
                  "prompt's KV blocks, and the output tokens count them all")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--output-json", f->output_json, "write the result here");
  cmd->callback([f, &exit_code] { exit_code = run(*f); });
}

}  // namespace folio::tools
