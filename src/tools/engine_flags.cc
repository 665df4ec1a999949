#include "tools/engine_flags.h"

#include <cstdlib>
#include <string>

namespace folio::tools {

void add_engine_flags(CLI::App* c, EngineFlags& f) {
  c->add_option("--model", f.load.model_dir, "Hugging Face model folder");
  c->add_option("--device", f.load.device, "auto | cpu | cuda (auto: cuda when a GPU is usable)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  c->add_option("--dtype", f.dtype, "CUDA weights/activations: auto (the checkpoint's) | bfloat16 | float16")
      ->check(CLI::IsMember({"auto", "bfloat16", "float16"}));
  c->add_option("--gpu-memory-utilization", f.gpu_memory_utilization,
                "share of GPU memory for weights, activations and KV cache (CUDA)")
      ->check(CLI::Range(0.01, 1.0));
  c->add_option("--tensor-parallel-size", f.tensor_parallel_size,
                "GPUs to split the model over (CUDA, one host; also -tp)")
      ->check(CLI::PositiveNumber);
  c->add_flag("--disable-custom-all-reduce", f.disable_custom_all_reduce,
              "tensor parallel: every all-reduce by NCCL (default: by peer loads and stores "
              "over NVLink where every GPU reaches every other)");
  c->add_option("--load-format", f.load.load_format, "auto | dummy (random weights)");
  c->add_option("--model-config", f.load.model_config_file, "config.json for --load-format dummy");
  c->add_option("--tokenizer", f.load.tokenizer_dir,
                "folder of tokenizer.json, tokenizer_config.json and the chat template (default: "
                "--model's)");
  c->add_option("--hf-overrides", f.load.hf_overrides,
                "JSON object whose keys replace config.json's, e.g. '{\"rope_scaling\": "
                "{\"rope_type\": \"yarn\", \"factor\": 4.0, "
                "\"original_max_position_embeddings\": 32768}}'");
  c->add_option("--kv-cache-mode", f.kv_cache_mode, "paged (PagedAttention) | token (TokenAttention)")
      ->check(CLI::IsMember({"paged", "token"}));
  // No CLI11 check: parse_kv_cache_dtype gives the message (fp8_e5m2 is "not supported", not
  // "not one of").
  c->add_option("--kv-cache-dtype", f.kv_cache_dtype,
                "KV cache storage: auto (the model's dtype) | fp8 | fp8_e4m3 (FP8 E4M3, scale 1.0: "
                "half the bytes)");
  c->add_option("--block-size", f.block_size, "tokens per KV block (paged mode)")
      ->check(CLI::Range(1, 1024));
  c->add_option("--num-kv-blocks", f.num_kv_blocks, "KV blocks in the pool (0: from memory)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--max-total-tokens", f.max_total_tokens, "token slots in token mode (0: from memory)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--kv-cache-memory", f.kv_cache_memory_gib, "KV cache budget in GiB (CPU)")
      ->check(CLI::PositiveNumber);
  c->add_option("--swap-space", f.swap_space_gib, "host swap space in GiB")
      ->check(CLI::NonNegativeNumber);
  c->add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", f.enable_prefix_caching,
              "reuse cached prefix blocks (default on)");
  c->add_option("--preemption-mode", f.preemption_mode, "recompute | swap")
      ->check(CLI::IsMember({"recompute", "swap"}));
  c->add_option("--scheduling-policy", f.scheduling_policy,
                "fcfs | priority | lof (longest output budget first: offline batches)")
      ->check(CLI::IsMember({"fcfs", "priority", "lof"}));
  // Unset (0), both follow vLLM V1's defaults by GPU and by use (engine/batch_defaults.h).
  c->add_option("--max-num-batched-tokens", f.max_num_batched_tokens,
                "token budget per step (default: 16384 offline / 8192 serving on GPUs of 70 GiB "
                "and more but A100s, 8192 / 2048 on other GPUs, 2048 on the CPU)")
      ->check(CLI::PositiveNumber);
  c->add_option("--max-num-seqs", f.max_num_seqs,
                "sequences per step (default: 1024 on GPUs of 70 GiB and more but A100s, else 256)")
      ->check(CLI::PositiveNumber);
  c->add_option("--max-model-len", f.max_model_len, "context length (0: the model's)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--long-prefill-token-threshold", f.long_prefill_token_threshold,
                "at most this many tokens of one sequence per step: long prompts prefill in chunks "
                "of it (0: no cap beyond the step budget)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--schedule-conservativeness", f.schedule_conservativeness,
                "admit a prompt only when the KV cache also keeps what running requests are "
                "expected to grow into (SGLang's; larger reserves more for outputs that may stop "
                "early, once a preemption has shown the cache too small for them; default 0.3; 0: "
                "admit whatever fits now and preempt when the cache runs out, as vLLM)")
      ->check(CLI::Range(0.0, 100.0));
  c->add_flag("--enable-chunked-prefill,!--no-enable-chunked-prefill", f.enable_chunked_prefill,
              "split long prompts across steps (default on)");
  c->add_flag("--enforce-eager", f.enforce_eager,
              "CUDA: run decode steps op by op instead of replaying CUDA graphs");
  c->add_flag("--device-sampling,!--no-device-sampling", f.device_sampling,
              "sample on the GPU so logits stay there (default on; off: host sampler)");
  c->add_flag("--async-scheduling,!--no-async-scheduling", f.async_scheduling,
              "schedule and prepare the next step while the GPU runs the current one "
              "(default on, CUDA; steps are synchronous while a request needs beam search, "
              "its prompt logprobs or more logprobs than the GPU returns)");
  c->add_option("--max-logprobs", f.max_logprobs, "cap on logprobs / prompt_logprobs")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--seed", f.seed, "engine seed (requests without their own seed)");
  c->add_option("--log-every", f.log_every, "log the scheduler state every N steps (0: end only)")
      ->check(CLI::NonNegativeNumber);
}

std::vector<std::string> expand_short_aliases(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-tp")
      a = "--tensor-parallel-size";
    else if (a.rfind("-tp=", 0) == 0)
      a = "--tensor-parallel-size=" + a.substr(4);
    out.push_back(std::move(a));
  }
  return out;
}

Result<EngineConfig> to_engine_config(const EngineFlags& f) {
  EngineConfig c;
  c.kv_mode = f.kv_cache_mode == "token" ? KvCacheMode::kToken : KvCacheMode::kPaged;
  c.block_size = f.block_size;
  c.num_kv_blocks = f.num_kv_blocks;
  c.max_total_tokens = f.max_total_tokens;
  c.kv_cache_memory_gib = f.kv_cache_memory_gib;
  c.swap_space_gib = f.swap_space_gib;
  FOLIO_ASSIGN_OR_RETURN(c.kv_cache_dtype, parse_kv_cache_dtype(f.kv_cache_dtype));
  c.gpu_memory_utilization = f.gpu_memory_utilization;
  c.dtype = f.dtype;
  c.tensor_parallel_size = f.tensor_parallel_size;
  c.custom_all_reduce = !f.disable_custom_all_reduce;
  c.enable_prefix_caching = f.enable_prefix_caching;
  c.device_sampling = f.device_sampling;
  c.async_scheduling = f.async_scheduling;
  c.enforce_eager = f.enforce_eager;
  c.sched.preemption_mode =
      f.preemption_mode == "swap" ? PreemptionMode::kSwap : PreemptionMode::kRecompute;
  if (f.scheduling_policy == "fcfs")
    c.sched.policy = SchedulePolicy::kFcfs;
  else if (f.scheduling_policy == "priority")
    c.sched.policy = SchedulePolicy::kPriority;
  else if (f.scheduling_policy == "lof")
    c.sched.policy = SchedulePolicy::kLongestOutputFirst;
  else
    return invalid_argument("--scheduling-policy must be fcfs, priority or lof, got '" +
                            f.scheduling_policy + "'");
  c.sched.max_num_batched_tokens = f.max_num_batched_tokens;
  c.sched.max_num_seqs = f.max_num_seqs;
  c.sched.max_model_len = f.max_model_len;  // 0 until the model is known
  c.sched.enable_chunked_prefill = f.enable_chunked_prefill;
  c.sched.long_prefill_token_threshold = f.long_prefill_token_threshold;
  c.sched.schedule_conservativeness = f.schedule_conservativeness;
  // A measuring switch (SchedulerConfig::decode_rows_longest_first, on by default; `queue` turns
  // it off), read here so that the scheduler itself stays free of the environment.
  if (const char* rows = std::getenv("FOLIO_DECODE_ROWS"); rows != nullptr && *rows != '\0') {
    const std::string v(rows);
    if (v != "longest-first" && v != "queue")
      return invalid_argument("FOLIO_DECODE_ROWS must be longest-first or queue, got '" + v + "'");
    c.sched.decode_rows_longest_first = v == "longest-first";
  }
  if (const char* ratio = std::getenv("FOLIO_ADMISSION_RATIO");
      ratio != nullptr && *ratio != '\0') {
    const std::string v(ratio);
    if (v != "reactive" && v != "sglang")
      return invalid_argument("FOLIO_ADMISSION_RATIO must be reactive or sglang, got '" + v + "'");
    c.sched.reactive_headroom = v == "reactive";
  }
  c.max_logprobs = f.max_logprobs;
  c.seed = f.seed;
  c.log_every_steps = f.log_every;
  if (c.sched.preemption_mode == PreemptionMode::kSwap && c.swap_space_gib <= 0)
    return invalid_argument("--preemption-mode swap needs --swap-space > 0");
  return c;
}

std::string check_model_source(const EngineFlags& f) {
  if (!f.load.model_dir.empty()) return "";
  if (f.load.load_format == "dummy" && !f.load.model_config_file.empty()) return "";
  return "give --model DIR, or --model-config FILE with --load-format dummy";
}

}  // namespace folio::tools
