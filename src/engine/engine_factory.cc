#include "engine/engine_factory.h"

#include <algorithm>
#include <cmath>

#include "base/file_util.h"
#include "base/log.h"
#include "model/cpu_llama_executor.h"
#include "model/llama_weights.h"
#include "model/safetensors.h"

namespace folio {

KvCacheShape plan_kv_cache(const EngineConfig& c, const ModelConfig& m) {
  KvCacheShape kv;
  const bool token = c.kv_mode == KvCacheMode::kToken;
  kv.block_size = token ? 1 : c.block_size;
  const double block_bytes = static_cast<double>(CpuLlamaExecutor::kv_block_bytes(m, kv.block_size));
  const int explicit_size = token ? c.max_total_tokens : c.num_kv_blocks;
  if (explicit_size > 0) {
    kv.num_blocks = explicit_size;
  } else {
    const double budget = c.kv_cache_memory_gib * (1ull << 30);
    kv.num_blocks = static_cast<int>(std::min(budget / block_bytes, 1.0e8));
  }
  kv.num_swap_blocks = static_cast<int>(c.swap_space_gib * (1ull << 30) / block_bytes);
  return kv;
}

Result<std::unique_ptr<EngineCore>> load_engine(const LoadOptions& o, EngineConfig config) {
  if (o.device != "cpu")
    return invalid_argument("--device " + o.device + " is not available in this build (cpu)");
  const bool dummy = o.load_format == "dummy";
  if (!dummy && o.load_format != "auto")
    return invalid_argument("--load-format must be auto or dummy, got " + o.load_format);
  Result<ModelConfig> cfg = invalid_argument("no model");
  if (dummy && !o.model_config_file.empty()) {
    FOLIO_ASSIGN_OR_RETURN(auto j, read_json_file(o.model_config_file));
    cfg = ModelConfig::from_json(j, o.model_config_file);
  } else {
    cfg = ModelConfig::load(o.model_dir);
  }
  if (!cfg.ok()) return cfg.status();
  ModelConfig model = *cfg;
  int& max_len = config.sched.max_model_len;
  if (max_len <= 0) max_len = model.max_position_embeddings;
  if (max_len > model.max_position_embeddings)
    return invalid_argument("--max-model-len " + std::to_string(max_len) +
                            " exceeds the model's max_position_embeddings " +
                            std::to_string(model.max_position_embeddings));
  LlamaWeights weights;
  if (dummy) {
    weights = LlamaWeights::dummy(model, config.seed);
  } else {
    FOLIO_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::open(o.model_dir));
    FOLIO_ASSIGN_OR_RETURN(weights, LlamaWeights::load(model, ck));
  }
  std::shared_ptr<const Tokenizer> tokenizer;
  if (!o.model_dir.empty() && file_exists(join_path(o.model_dir, "tokenizer.json"))) {
    FOLIO_ASSIGN_OR_RETURN(Tokenizer t, Tokenizer::load(o.model_dir));
    tokenizer = std::make_shared<const Tokenizer>(std::move(t));
  }
  KvCacheShape kv = plan_kv_cache(config, model);
  auto executor = std::make_unique<CpuLlamaExecutor>(model, std::move(weights), kv);
  return EngineCore::create(config, model, std::move(executor), std::move(tokenizer));
}

}  // namespace folio
