// folio bench latency: batch latency (B3) with the bandwidth floor beside the figure.
#include <cstdio>
#include <iostream>

#include "tools/bench_commands.h"
#include "tools/bench_latency.h"
#include "tools/bench_meta.h"

namespace folio::tools {
namespace {

struct LatencyFlags {
  EngineFlags engine;
  LatencyConfig bench;
  double bandwidth_gbps = 0.0;  // 0: measure the engine's device (resolve_floor_bandwidth)
  std::string output_json;
};

void print_result(const nlohmann::json& j, const std::string& device) {
  std::printf("Latency (%s, KV cache %s), batch %d, %d in / %d out, %d iterations:\n",
              device.c_str(), j["kv_cache_dtype"].get<std::string>().c_str(),
              j["batch_size"].get<int>(), j["input_len"].get<int>(), j["output_len"].get<int>(),
              j["num_iters"].get<int>());
  std::printf("  avg latency %.4f s, p50 %.4f s, p99 %.4f s\n", j["avg_latency"].get<double>(),
              j["percentiles"]["50"].get<double>(), j["percentiles"]["99"].get<double>());
  std::printf("  TTFT (prefill of the batch): mean %.3f ms\n", j["mean_ttft_ms"].get<double>());
  std::printf("  TPOT (mean step of the full batch decoding, %.0f such steps per iteration): "
              "mean %.3f ms, median %.3f ms; (total - TTFT) / (out - 1): %.3f ms\n",
              j["full_batch_decode_steps"].get<double>(), j["mean_tpot_ms"].get<double>(),
              j["median_tpot_ms"].get<double>(), j["mean_tpot_wall_ms"].get<double>());
  if (j["full_batch_decode_steps"].get<double>() == 0 && j["output_len"].get<int>() > 1)
    std::printf("  (no step decoded the whole batch alone: the prefill outlasted the first "
                "requests' outputs, or the batch exceeds --max-num-seqs; TPOT is the wall-clock "
                "form)\n");
  std::printf("  bandwidth floor: %.3f ms per step (%.3g bytes at %.0f GB/s, %s); "
              "floor / TPOT = %.1f%%\n",
              j["floor_tpot_ms"].get<double>(), j["bytes_per_decode_step"].get<double>(),
              j["bandwidth_gbps"].get<double>(), j["bandwidth_source"].get<std::string>().c_str(),
              100.0 * j["floor_ratio"].get<double>());
}

int run(const LatencyFlags& f) {
  if (std::string m = check_model_source(f.engine); !m.empty()) {
    std::cerr << "folio bench latency: " << m << "\n";
    return 2;
  }
  auto config = to_engine_config(f.engine);
  if (!config.ok()) {
    std::cerr << "folio bench latency: " << config.status().message() << "\n";
    return 2;
  }
  auto engine = load_engine(f.engine.load, *config);
  if (!engine.ok()) {
    std::cerr << "folio bench latency: " << engine.status().message() << "\n";
    return 2;
  }
  LatencyConfig c = f.bench;
  c.seed = f.engine.seed;
  auto iters = run_latency(**engine, c);
  if (!iters.ok()) {
    std::cerr << "folio bench latency: " << iters.status().message() << "\n";
    return iters.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  const ModelConfig& m = (*engine)->model_config();
  const double mean_context = c.input_len + c.output_len / 2.0;
  const FloorBandwidth bw = resolve_floor_bandwidth((*engine)->executor(), f.bandwidth_gbps);
  if (!bw.note.empty())
    std::cerr << "folio bench latency: could not measure the copy rate (" << bw.note
              << "); the floor assumes " << bw.gbps << " GB/s (pass --bandwidth-gbps)\n";
  BandwidthFloor floor = decode_bandwidth_floor(m, c.batch_size, mean_context, bw.gbps,
                                                (*engine)->config().kv_cache_dtype);
  nlohmann::json j = latency_json(c, *iters, floor, bw.gbps);
  j["bandwidth_source"] = bw.source;
  // Given, or the engine's defaults for the device (engine/batch_defaults.h).
  j["max_num_batched_tokens"] = (*engine)->config().sched.max_num_batched_tokens;
  j["max_num_seqs"] = (*engine)->config().sched.max_num_seqs;
  const std::string device = (*engine)->executor().device_name();
  print_result(j, device);
  j["host_loop"] = host_loop_json((*engine)->counters());
  print_host_loop(j["host_loop"]);
  if (!f.output_json.empty()) {
    j.update(run_metadata(device));
    j["benchmark"] = "latency";
    if (Status st = write_json_file(f.output_json, j); !st.ok()) {
      std::cerr << "folio bench latency: " << st.message() << "\n";
      return 2;
    }
  }
  return 0;
}

}  // namespace

void register_bench_latency(CLI::App* bench, int& exit_code) {
  auto f = std::make_shared<LatencyFlags>();
  auto* cmd = bench->add_subcommand("latency", "Batch latency: TTFT and time per output token");
  add_engine_flags(cmd, f->engine);
  cmd->add_option("--batch-size", f->bench.batch_size, "requests per batch")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--input-len", f->bench.input_len, "prompt tokens")->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--output-len", f->bench.output_len, "output tokens")->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--num-iters", f->bench.num_iters, "measured iterations")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--num-iters-warmup", f->bench.num_iters_warmup, "unmeasured iterations first")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--bandwidth-gbps", f->bandwidth_gbps,
                  "memory bandwidth for the floor, GB/s (default: measured on the device: a copy "
                  "of buffers beyond its caches; 3000 where that fails)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--output-json", f->output_json, "write the result here");
  cmd->callback([f, &exit_code] { exit_code = run(*f); });
}

}  // namespace folio::tools
