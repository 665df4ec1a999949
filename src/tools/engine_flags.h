// The engine flags every subcommand that runs a model takes (generate, serve, bench), with
// vLLM's names, turned into LoadOptions + EngineConfig after validation.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "engine/engine_factory.h"

namespace folio::tools {

struct EngineFlags {
  LoadOptions load;
  std::string kv_cache_mode = "paged";
  int block_size = 16;
  int num_kv_blocks = 0;
  int max_total_tokens = 0;
  double kv_cache_memory_gib = 0.25;
  double swap_space_gib = 0.0;
  bool enable_prefix_caching = true;
  std::string preemption_mode = "recompute";
  std::string scheduling_policy = "fcfs";
  int max_num_batched_tokens = 2048;
  int max_num_seqs = 256;
  int max_model_len = 0;
  bool enable_chunked_prefill = true;
  int max_logprobs = 20;
  uint64_t seed = 0;
  int log_every = 0;
};

// `model_required`: --model must be given (generate); serve has a default model.
void add_engine_flags(CLI::App* cmd, EngineFlags& f, bool model_required);
Result<EngineConfig> to_engine_config(const EngineFlags& f);

}  // namespace folio::tools
