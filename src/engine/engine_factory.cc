#include "engine/engine_factory.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/file_util.h"
#include "base/log.h"
#include "engine/batch_defaults.h"
#include "model/checkpoint_coverage.h"
#include "model/cpu_llama_executor.h"
#include "model/llama_weights.h"
#include "model/safetensors.h"
#ifdef FOLIO_HAVE_CUDA
#include "model/cuda_llama_executor.h"
#include "model/cuda_tp_executor.h"
#endif

namespace folio {

KvCacheShape plan_kv_cache(const EngineConfig& c, const ModelConfig& m) {
  KvCacheShape kv;
  const bool token = c.kv_mode == KvCacheMode::kToken;
  kv.block_size = token ? 1 : c.block_size;
  kv.dtype = c.kv_cache_dtype;
  // The CPU reference stores fp8 K/V as e4m3-rounded values in fp32 (no byte-packed cache to
  // convert on every read), so a block costs the same whatever the dtype: plan in fp32.
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

namespace {

// --hf-overrides' text as a JSON object (empty text: no overrides).
Result<nlohmann::json> parse_hf_overrides(const std::string& text) {
  if (text.empty()) return nlohmann::json::object();
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument("--hf-overrides is not valid JSON: " + text);
  if (!j.is_object())
    return invalid_argument("--hf-overrides must be a JSON object ({\"key\": value, ...}), got " +
                            text);
  return j;
}

// A factor as a person writes it: 4, 2.5.
std::string format_number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// "auto" is cuda when this build has the CUDA executor and a GPU is reachable, else cpu.
Result<std::string> resolve_device(const std::string& device) {
#ifdef FOLIO_HAVE_CUDA
  if (device == "auto") return std::string(cuda_device_available() ? "cuda" : "cpu");
  if (device == "cuda") return device;
#else
  if (device == "auto") return std::string("cpu");
  if (device == "cuda")
    return invalid_argument("--device cuda: this build has no CUDA backend (configure with "
                            "-DFOLIO_CUDA=ON)");
#endif
  if (device == "cpu") return device;
  return invalid_argument("--device must be auto, cpu or cuda, got " + device);
}

// The unset step budget and seats (0) for the backend the engine runs on; the line to log once
// the engine is up (which limits, whether defaults, for what).
Result<std::string> resolve_batch_limits_for(bool on_cuda, EngineConfig& config) {
  const SchedulerConfig before = config.sched;
  GpuSummary gpu;
#ifdef FOLIO_HAVE_CUDA
  if (on_cuda) FOLIO_RETURN_IF_ERROR(cuda_device_summary(gpu.name, gpu.total_memory));
#endif
  resolve_batch_limits(config, on_cuda ? &gpu : nullptr);
  auto said = [](int was, int now) { return std::to_string(now) + (was == 0 ? " (default)" : ""); };
  return "scheduler: max_num_batched_tokens " +
         said(before.max_num_batched_tokens, config.sched.max_num_batched_tokens) +
         ", max_num_seqs " + said(before.max_num_seqs, config.sched.max_num_seqs) + " for " +
         (on_cuda ? gpu.name : std::string("the cpu")) +
         (config.usage == UsageContext::kServer ? ", serving" : ", offline");
}

Result<std::unique_ptr<Executor>> make_cpu_executor(const LoadOptions& o, const EngineConfig& c,
                                                    const ModelConfig& model, bool dummy) {
  LlamaWeights weights;
  if (dummy) {
    weights = LlamaWeights::dummy(model, c.seed);
  } else {
    FOLIO_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::open(o.model_dir));
    FOLIO_RETURN_IF_ERROR(check_every_tensor_is_read(model, ck));
    FOLIO_ASSIGN_OR_RETURN(weights, LlamaWeights::load(model, ck));
  }
  KvCacheShape kv = plan_kv_cache(c, model);
  return std::unique_ptr<Executor>(
      std::make_unique<CpuLlamaExecutor>(model, std::move(weights), kv));
}

#ifdef FOLIO_HAVE_CUDA
// Weights go straight from the checkpoint (or the GPU's random generator) to the device; the
// executor sizes the KV cache from --gpu-memory-utilization unless a size is given.
Result<std::unique_ptr<Executor>> make_cuda_executor(const LoadOptions& o, const EngineConfig& c,
                                                     const ModelConfig& model, bool dummy) {
  CudaExecutorOptions x;
  const bool token = c.kv_mode == KvCacheMode::kToken;
  x.dtype = c.dtype;
  x.gpu_memory_utilization = c.gpu_memory_utilization;
  x.block_size = token ? 1 : c.block_size;
  x.kv_cache_dtype = c.kv_cache_dtype;
  x.num_blocks = token ? c.max_total_tokens : c.num_kv_blocks;
  x.swap_space_gib = c.swap_space_gib;
  x.max_num_batched_tokens = c.sched.max_num_batched_tokens;
  x.max_num_seqs = c.sched.max_num_seqs;
  x.max_model_len = c.sched.max_model_len;
  x.seed = c.seed;
  x.cuda_graphs = !c.enforce_eager;
  x.custom_all_reduce = c.custom_all_reduce;
  std::unique_ptr<Checkpoint> ck;
  if (!dummy) {
    FOLIO_ASSIGN_OR_RETURN(Checkpoint opened, Checkpoint::open(o.model_dir));
    FOLIO_RETURN_IF_ERROR(check_every_tensor_is_read(model, opened));
    ck = std::make_unique<Checkpoint>(std::move(opened));
  }
  if (c.tensor_parallel_size > 1) {
    FOLIO_ASSIGN_OR_RETURN(auto tp,
                           CudaTpExecutor::create(model, ck.get(), x, c.tensor_parallel_size));
    return std::unique_ptr<Executor>(std::move(tp));
  }
  FOLIO_ASSIGN_OR_RETURN(auto ex, CudaLlamaExecutor::create(model, ck.get(), x));
  return std::unique_ptr<Executor>(std::move(ex));
}
#endif

// --max-model-len: unset, the longest the model runs at as its reference does (ModelConfig::
// max_context_len: max_position_embeddings, extended by linear or yarn rope scaling as vLLM
// derives it); set, at most that.
Status resolve_max_model_len(const ModelConfig& model, int& max_len) {
  const int limit = model.max_context_len();
  if (max_len <= 0) {
    max_len = limit;
    return Status();
  }
  if (max_len > limit) {
    std::string why = "max_position_embeddings " + std::to_string(model.max_position_embeddings);
    if (limit != model.max_position_embeddings)
      why = "length " + std::to_string(limit) + " (" + model.rope.type + " rope scaling by " +
            format_number(model.rope.factor) + ")";
    return invalid_argument("--max-model-len " + std::to_string(max_len) + " exceeds the model's " +
                            why);
  }
  return Status();
}

}  // namespace

Result<std::unique_ptr<EngineCore>> load_engine(const LoadOptions& o, EngineConfig config) {
  FOLIO_ASSIGN_OR_RETURN(const std::string device, resolve_device(o.device));
  const bool dummy = o.load_format == "dummy";
  if (!dummy && o.load_format != "auto")
    return invalid_argument("--load-format must be auto or dummy, got " + o.load_format);
  FOLIO_ASSIGN_OR_RETURN(const nlohmann::json overrides, parse_hf_overrides(o.hf_overrides));
  Result<ModelConfig> cfg = invalid_argument("no model");
  if (dummy && !o.model_config_file.empty()) {
    FOLIO_ASSIGN_OR_RETURN(auto j, read_json_file(o.model_config_file));
    FOLIO_RETURN_IF_ERROR(apply_hf_overrides(j, overrides));
    cfg = ModelConfig::from_json(j, o.model_config_file);
  } else {
    cfg = ModelConfig::load(o.model_dir, overrides);
  }
  if (!cfg.ok()) return cfg.status();
  if (!overrides.empty()) log_info("config.json overridden by --hf-overrides " + overrides.dump());
  ModelConfig model = *cfg;
  int& max_len = config.sched.max_model_len;
  FOLIO_RETURN_IF_ERROR(resolve_max_model_len(model, max_len));
  if (model.sliding_window && max_len > *model.sliding_window) {
    const bool frees = model.kv_window() > 0 && config.kv_mode == KvCacheMode::kPaged;
    log_info("sliding-window attention: window " + std::to_string(*model.sliding_window) + " on " +
             (model.sliding_layers.empty() ? std::string("every layer") : "some layers") +
             (frees ? "; the blocks that fall out of it are freed"
                    : "; every position's KV stays until its request ends") +
             " (on a GPU, prefill attention then runs on kernel v2)");
  }
  // A model folder without tokenizer.json runs on token ids; a --tokenizer folder must have one.
  std::shared_ptr<const Tokenizer> tokenizer;
  const std::string& tok_dir = o.tokenizer_source();
  const bool has_tokenizer = !tok_dir.empty() && file_exists(join_path(tok_dir, "tokenizer.json"));
  if (!o.tokenizer_dir.empty() && !has_tokenizer)
    return not_found("--tokenizer " + tok_dir + ": no tokenizer.json there");
  if (has_tokenizer) {
    FOLIO_ASSIGN_OR_RETURN(Tokenizer t, Tokenizer::load(tok_dir));
    tokenizer = std::make_shared<const Tokenizer>(std::move(t));
  }
  std::unique_ptr<Executor> executor;
  const int tp = config.tensor_parallel_size;
  if (tp > 1 && device != "cuda")
    return invalid_argument("--tensor-parallel-size " + std::to_string(tp) +
                            " needs --device cuda (or auto with GPUs present); this run is on " +
                            device);
  bool on_cuda = device == "cuda";
#ifdef FOLIO_HAVE_CUDA
  if (tp > 1) {
    FOLIO_RETURN_IF_ERROR(check_tensor_parallel(model, tp));
  } else if (on_cuda && o.device == "auto" && !cuda_model_supported(model).ok()) {
    log_warn("--device auto: " + cuda_model_supported(model).message() + "; running on cpu");
    on_cuda = false;
  }
#endif
  FOLIO_ASSIGN_OR_RETURN(const std::string limits_line, resolve_batch_limits_for(on_cuda, config));
#ifdef FOLIO_HAVE_CUDA
  if (on_cuda) {
    FOLIO_ASSIGN_OR_RETURN(executor, make_cuda_executor(o, config, model, dummy));
  }
#endif
  if (!executor) {
    FOLIO_ASSIGN_OR_RETURN(executor, make_cpu_executor(o, config, model, dummy));
  }
  auto core = EngineCore::create(config, model, std::move(executor), std::move(tokenizer));
  if (core.ok()) log_info(limits_line);
  return core;
}

}  // namespace folio
