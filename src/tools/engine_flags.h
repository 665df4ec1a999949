// The engine flags every subcommand that runs a model takes (generate, serve, bench), with
// vLLM's names, turned into LoadOptions + EngineConfig after validation.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "engine/engine_factory.h"

namespace folio::tools {

// The tools default to --device auto: cuda when built with it and a GPU is present, else cpu.
inline LoadOptions default_load_options() {
  LoadOptions o;
  o.device = "auto";
  return o;
}

struct EngineFlags {
  LoadOptions load = default_load_options();
  std::string kv_cache_mode = "paged";
  int block_size = 16;
  int num_kv_blocks = 0;
  int max_total_tokens = 0;
  double kv_cache_memory_gib = 0.25;
  double swap_space_gib = 0.0;
  double gpu_memory_utilization = 0.9;
  std::string dtype = "auto";
  std::string kv_cache_dtype = "auto";  // checked by to_engine_config (parse_kv_cache_dtype)
  int tensor_parallel_size = 1;
  bool disable_custom_all_reduce = false;
  bool enable_prefix_caching = true;
  bool device_sampling = true;
  bool async_scheduling = true;
  bool enforce_eager = false;
  std::string preemption_mode = "recompute";
  std::string scheduling_policy = "fcfs";
  int max_num_batched_tokens = 0;  // 0: by device and use, set by load_engine (batch_defaults.h)
  int max_num_seqs = 0;            // likewise
  int max_model_len = 0;
  bool enable_chunked_prefill = true;
  int long_prefill_token_threshold = 0;    // vLLM's; 0: off
  double schedule_conservativeness = 0.3;  // SchedulerConfig's; 0: vLLM's admission
  int max_logprobs = 20;
  uint64_t seed = 0;
  int log_every = 0;
};

// --model is optional here: serve has a default model, and the others call check_model_source.
void add_engine_flags(CLI::App* cmd, EngineFlags& f);
// vLLM spells --tensor-parallel-size `-tp`, a short option CLI11 cannot declare: main() rewrites
// "-tp" (and "-tp=N") to the long form before parsing.
std::vector<std::string> expand_short_aliases(int argc, char** argv);
Result<EngineConfig> to_engine_config(const EngineFlags& f);
// The model flags' check for commands whose --model is optional: --model, or --model-config with
// --load-format dummy. Returns "" when fine, else the message.
std::string check_model_source(const EngineFlags& f);

}  // namespace folio::tools
