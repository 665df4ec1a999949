#include "tools/bench_latency.h"

#include <algorithm>
#include <chrono>

#include "tools/bench_stats.h"
#include "tools/bench_throughput.h"
#include "tools/bench_workload.h"

namespace folio::tools {
namespace {

using Clock = std::chrono::steady_clock;

Result<LatencyIteration> run_iteration(EngineCore& engine, const LatencyConfig& c, int iter) {
  const auto items = fixed_workload(c.input_len, c.output_len, c.batch_size);
  // A fresh stream per iteration: repeated prompts would be prefix-cache hits.
  auto prompts = make_random_prompts(items, engine.model_config().vocab_size,
                                     c.seed + 0x9E37ull * static_cast<uint64_t>(iter + 1));
  std::vector<Clock::time_point> first(items.size());
  std::vector<bool> seen(items.size(), false);
  int failed = 0;
  LiveRequestGuard guard(engine);
  const auto t0 = Clock::now();
  for (size_t i = 0; i < items.size(); ++i) {
    GenerateRequest g;
    g.request_id = "latency-" + std::to_string(iter) + "-" + std::to_string(i);
    g.prompt_token_ids = std::move(prompts[i]);
    g.params = bench_sampling_params(c.output_len, 1.0f);
    auto sink = [&, i](RequestOutput&& o) {
      if (!o.error.ok()) ++failed;
      if (!seen[i] && o.num_generated_tokens > 0) {
        seen[i] = true;
        first[i] = Clock::now();
      }
    };
    guard.added(g.request_id);
    FOLIO_RETURN_IF_ERROR(engine.add_request(std::move(g), sink, /*final_only=*/false));
  }
  // A step ran the full batch alone when it computed and sampled exactly one token per request:
  // no prefill chunk, no request finished before it. A synchronous step() computes and samples
  // the same step. An async one (EngineCounters::async_steps) launches the next step and waits
  // for the one launched by the call before, whose tokens it samples: its time is that step's,
  // so that step must have computed the batch (else the first decode call would carry the
  // wait for the last prefill chunk).
  const int64_t batch = c.batch_size;
  double full_steps_s = 0.0;
  int full_steps = 0;
  int64_t launched_before = -1;  // tokens computed by the previous async call's launch
  while (engine.has_unfinished()) {
    const EngineCounters before = engine.counters();
    const auto s0 = Clock::now();
    FOLIO_RETURN_IF_ERROR(engine.step());
    const EngineCounters& after = engine.counters();
    const int64_t computed = after.computed_tokens - before.computed_tokens;
    const bool async = after.async_steps > before.async_steps;
    const int64_t timed_step_tokens = async ? launched_before : computed;
    if (timed_step_tokens == batch && after.generated_tokens - before.generated_tokens == batch &&
        after.model_steps == before.model_steps + 1) {
      full_steps_s += std::chrono::duration<double>(Clock::now() - s0).count();
      ++full_steps;
    }
    launched_before = async ? computed : -1;
  }
  const auto t1 = Clock::now();
  if (failed > 0)
    return resource_exhausted(std::to_string(failed) + " of the batch's requests failed "
                              "(does the KV cache hold batch * (input + output) tokens?)");
  LatencyIteration it;
  it.total_s = std::chrono::duration<double>(t1 - t0).count();
  it.ttft_s = std::chrono::duration<double>(*std::max_element(first.begin(), first.end()) - t0).count();
  if (c.output_len > 1) it.tpot_wall_s = (it.total_s - it.ttft_s) / (c.output_len - 1);
  it.full_batch_steps = full_steps;
  it.tpot_s = full_steps > 0 ? full_steps_s / full_steps : it.tpot_wall_s;
  return it;
}

}  // namespace

Result<std::vector<LatencyIteration>> run_latency(EngineCore& engine, const LatencyConfig& c) {
  if (c.input_len + c.output_len > engine.max_model_len())
    return invalid_argument("--input-len + --output-len = " +
                            std::to_string(c.input_len + c.output_len) +
                            " exceeds the context length " + std::to_string(engine.max_model_len()));
  const int64_t need = int64_t{c.batch_size} * (c.input_len + c.output_len);
  if (need > engine.kv_capacity_tokens())
    return invalid_argument("the batch needs " + std::to_string(need) + " KV tokens, the cache holds " +
                            std::to_string(engine.kv_capacity_tokens()) +
                            " (raise --kv-cache-memory or --num-kv-blocks)");
  std::vector<LatencyIteration> out;
  for (int i = 0; i < c.num_iters_warmup + c.num_iters; ++i) {
    FOLIO_ASSIGN_OR_RETURN(LatencyIteration it, run_iteration(engine, c, i));
    if (i >= c.num_iters_warmup) out.push_back(it);
  }
  return out;
}

int64_t decode_weight_params(const ModelConfig& m) {
  const int64_t h = m.hidden_size;
  int64_t attn = h * m.q_size() + 2 * h * m.kv_size() + int64_t{m.q_size()} * h;
  if (m.qkv_bias) attn += m.q_size() + 2 * m.kv_size();
  if (m.qk_norm) attn += 2 * m.head_dim;
  const int64_t mlp = 3 * h * m.intermediate_size;
  const int64_t norms = 2 * h;
  const int64_t head = int64_t{m.vocab_size} * h;
  return m.num_layers * (attn + mlp + norms) + h + head;
}

int dtype_bytes(const ModelConfig& m) {
  return m.dtype == "float32" ? 4 : 2;
}

int kv_dtype_bytes(const ModelConfig& m, KvCacheDtype kv) {
  return kv == KvCacheDtype::kFp8E4m3 ? 1 : dtype_bytes(m);
}

int64_t kv_bytes_per_token(const ModelConfig& m, KvCacheDtype kv) {
  return 2 * int64_t{m.num_layers} * m.num_kv_heads * m.head_dim * kv_dtype_bytes(m, kv);
}

BandwidthFloor decode_bandwidth_floor(const ModelConfig& m, int batch, double mean_context,
                                      double bandwidth_gbps, KvCacheDtype kv) {
  BandwidthFloor f;
  f.kv_dtype = kv;
  f.weight_bytes = static_cast<double>(decode_weight_params(m)) * dtype_bytes(m);
  // A sliding layer reads at most its window of keys: its share of the tokens is capped there
  // (min of the mean context, exact while every step's context lies on one side of the window).
  double layer_tokens = 0;
  for (int l = 0; l < m.num_layers; ++l)
    layer_tokens +=
        m.layer_window(l) > 0 ? std::min(mean_context, double(m.layer_window(l))) : mean_context;
  f.kv_bytes = batch * layer_tokens / m.num_layers * static_cast<double>(kv_bytes_per_token(m, kv));
  f.bytes_per_step = f.weight_bytes + f.kv_bytes;
  f.floor_s = bandwidth_gbps > 0 ? f.bytes_per_step / (bandwidth_gbps * 1e9) : 0.0;
  return f;
}

FloorBandwidth resolve_floor_bandwidth(const Executor& executor, double flag_gbps) {
  FloorBandwidth b;
  if (flag_gbps > 0) {
    b.gbps = flag_gbps;
    b.source = "flag";
    return b;
  }
  Result<double> measured = executor.measure_copy_gbps();
  if (measured.ok() && *measured > 0) {
    b.gbps = *measured;
    b.source = "measured";
  } else {
    b.note = measured.ok() ? "the measured rate was not positive" : measured.status().message();
  }
  return b;
}

nlohmann::json latency_json(const LatencyConfig& c, const std::vector<LatencyIteration>& iters,
                            const BandwidthFloor& floor, double bandwidth_gbps) {
  std::vector<double> total, ttft, tpot, tpot_wall, full_steps;
  for (const auto& it : iters) {
    total.push_back(it.total_s);
    ttft.push_back(it.ttft_s);
    tpot.push_back(it.tpot_s);
    tpot_wall.push_back(it.tpot_wall_s);
    full_steps.push_back(it.full_batch_steps);
  }
  const Summary lat = summarize(total);
  const double mean_tpot = mean(tpot);
  nlohmann::json percentiles;
  for (int p : {10, 25, 50, 75, 90, 99}) percentiles[std::to_string(p)] = percentile(total, p);
  return {{"batch_size", c.batch_size},
          {"input_len", c.input_len},
          {"output_len", c.output_len},
          {"kv_cache_dtype", kv_cache_dtype_name(floor.kv_dtype)},
          {"num_iters", static_cast<int>(iters.size())},
          {"avg_latency", lat.mean},
          {"latencies", total},
          {"percentiles", percentiles},
          {"mean_ttft_ms", mean(ttft) * 1000.0},
          {"median_ttft_ms", percentile(ttft, 50) * 1000.0},
          {"mean_tpot_ms", mean_tpot * 1000.0},
          {"median_tpot_ms", percentile(tpot, 50) * 1000.0},
          {"mean_tpot_wall_ms", mean(tpot_wall) * 1000.0},
          {"full_batch_decode_steps", mean(full_steps)},
          {"bandwidth_gbps", bandwidth_gbps},
          {"bytes_per_decode_step", floor.bytes_per_step},
          {"weight_bytes", floor.weight_bytes},
          {"kv_bytes_per_step", floor.kv_bytes},
          {"floor_tpot_ms", floor.floor_s * 1000.0},
          {"floor_ratio", mean_tpot > 0 ? floor.floor_s / mean_tpot : 0.0}};
}

}  // namespace folio::tools
