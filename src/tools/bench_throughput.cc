#include "tools/bench_throughput.h"

#include <algorithm>
#include <chrono>

namespace folio::tools {

SamplingParams bench_sampling_params(int output_len, float temperature) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_p = 1.0f;
  p.max_tokens = output_len;
  p.ignore_eos = true;
  p.has_temperature = p.has_top_p = p.has_top_k = p.has_min_p = p.has_repetition_penalty = true;
  return p;
}

Result<ThroughputResult> run_throughput(EngineCore& engine, const std::vector<WorkloadItem>& items,
                                        uint64_t seed, int n) {
  if (n < 1) return invalid_argument("n must be at least 1");
  const int max_len = engine.max_model_len();
  for (size_t i = 0; i < items.size(); ++i) {
    if (n > 1 && items[i].max_tokens > 0)
      return invalid_argument("request " + std::to_string(i + 1) +
                              " stops early (\"max_tokens\"), which n > 1 does not support");
    const int budget = std::max(items[i].output_len, items[i].max_tokens);
    if (items[i].input_len + budget > max_len)
      return invalid_argument("request " + std::to_string(i + 1) + " needs " +
                              std::to_string(items[i].input_len) + " + " + std::to_string(budget) +
                              " tokens, over the context length " + std::to_string(max_len));
  }
  auto prompts = make_random_prompts(items, engine.model_config().vocab_size, seed);
  ThroughputResult r;
  r.num_requests = static_cast<int>(items.size());
  r.n = n;
  r.prompt_tokens = total_input_tokens(items);
  // Requests whose EOS the benchmark plays (max_tokens > 0): streamed, and ended after the step
  // whose output reaches their length (not inside the sink: abort() emits to it).
  std::vector<std::string> to_end;
  LiveRequestGuard guard(engine);
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < items.size(); ++i) {
    GenerateRequest g;
    g.request_id = "bench-" + std::to_string(i);
    g.prompt_token_ids = std::move(prompts[i]);
    g.params = bench_sampling_params(items[i].output_len, 1.0f);
    g.params.n = n;
    const bool plays_eos = items[i].max_tokens > 0;
    if (plays_eos) {
      g.params.max_tokens = items[i].max_tokens;
      g.params.ignore_eos = false;
    }
    auto sink = [&r, &to_end, plays_eos, id = g.request_id, stop_at = items[i].output_len,
                 ended = false](RequestOutput&& o) mutable {
      if (o.finished) {
        r.output_tokens += o.num_generated_tokens;
        if (!o.error.ok()) ++r.num_failed;
      } else if (plays_eos && !ended && o.num_generated_tokens >= stop_at) {
        ended = true;
        to_end.push_back(id);
      }
    };
    guard.added(g.request_id);
    FOLIO_RETURN_IF_ERROR(engine.add_request(std::move(g), sink, /*final_only=*/!plays_eos));
  }
  // Bounded: every request ends within its max_tokens decode steps plus its prefill chunks
  // (and recompute after preemption); the scheduler fails requests that can never fit.
  while (engine.has_unfinished()) {
    FOLIO_RETURN_IF_ERROR(engine.step());
    for (const std::string& id : to_end) {
      if (!engine.is_live(id)) continue;  // it stopped by itself (a real EOS) in the same step
      engine.abort(id);
      ++r.num_ended_at_output_len;
    }
    to_end.clear();
    r.peak_running_sequences = std::max(r.peak_running_sequences, engine.scheduler().num_running());
  }
  r.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const SchedulerStats& s = engine.scheduler().stats();
  r.num_steps = s.num_steps;
  r.num_preemptions = s.num_preemptions;
  r.scheduled_tokens = s.num_scheduled_tokens;
  r.prefix_cache_hit_tokens = s.num_prefix_hit_tokens;
  r.kv_slot_utilization = s.kv_slot_utilization();
  r.peak_kv_blocks_used = s.peak_blocks_used;
  r.kv_num_blocks = engine.kv().num_total_blocks();
  r.kv_block_size = engine.kv().block_size();
  r.kv_cache_dtype = kv_cache_dtype_name(engine.config().kv_cache_dtype);
  r.max_num_batched_tokens = engine.config().sched.max_num_batched_tokens;
  r.max_num_seqs = engine.config().sched.max_num_seqs;
  r.schedule_conservativeness = engine.config().sched.schedule_conservativeness;
  return r;
}

nlohmann::json throughput_json(const ThroughputResult& r) {
  const double t = r.elapsed_s > 0 ? r.elapsed_s : 0.0;
  auto per_s = [t](double x) { return t > 0 ? x / t : 0.0; };
  return {
      {"requests_per_second", per_s(r.num_requests - r.num_failed)},
      {"output_tokens_per_second", per_s(static_cast<double>(r.output_tokens))},
      {"total_tokens_per_second", per_s(static_cast<double>(r.prompt_tokens + r.output_tokens))},
      {"elapsed_seconds", t},
      {"num_requests", r.num_requests},
      {"n", r.n},
      {"num_failed", r.num_failed},
      {"prompt_tokens", r.prompt_tokens},
      {"output_tokens", r.output_tokens},
      {"num_steps", r.num_steps},
      {"num_preemptions", r.num_preemptions},
      {"kv_slot_utilization", r.kv_slot_utilization},
      {"peak_running_sequences", r.peak_running_sequences},
      {"peak_kv_blocks_used", r.peak_kv_blocks_used},
      {"kv_num_blocks", r.kv_num_blocks},
      {"kv_block_size", r.kv_block_size},
      {"kv_cache_dtype", r.kv_cache_dtype},
      {"max_num_batched_tokens", r.max_num_batched_tokens},
      {"max_num_seqs", r.max_num_seqs},
      {"schedule_conservativeness", r.schedule_conservativeness},
      {"num_ended_at_output_len", r.num_ended_at_output_len},
      {"scheduled_tokens", r.scheduled_tokens},
      {"prefix_cache_hit_tokens", r.prefix_cache_hit_tokens}};
}

}  // namespace folio::tools
