#include "engine/engine_core.h"

#include <algorithm>

#include "base/env.h"
#include "base/log.h"
#include "engine/batch_builder.h"
#include "engine/request_state.h"
#include "kv/paged_kv_cache_manager.h"
#include "kv/token_kv_cache_manager.h"

namespace folio {

std::unique_ptr<KvCacheManager> make_kv_cache_manager(const EngineConfig& c, int num_blocks,
                                                      int num_host_blocks) {
  if (c.kv_mode == KvCacheMode::kToken) {
    TokenKvConfig t;
    t.max_total_tokens = num_blocks;
    t.num_host_slots = num_host_blocks;
    t.enable_prefix_caching = c.enable_prefix_caching;
    return std::make_unique<TokenKvCacheManager>(t);
  }
  PagedKvConfig p;
  p.num_blocks = num_blocks;
  p.block_size = c.block_size;
  p.num_host_blocks = num_host_blocks;
  p.enable_prefix_caching = c.enable_prefix_caching;
  p.sliding_window = c.sched.sliding_window;
  return std::make_unique<PagedKvCacheManager>(p);
}

Result<std::unique_ptr<EngineCore>> EngineCore::create(const EngineConfig& config,
                                                       const ModelConfig& model,
                                                       std::unique_ptr<Executor> executor,
                                                       std::shared_ptr<const Tokenizer> tokenizer) {
  FOLIO_RETURN_IF_ERROR(config.validate());
  const KvCacheShape& kv = executor->kv_shape();
  const int want_bs = config.kv_mode == KvCacheMode::kToken ? 1 : config.block_size;
  if (kv.block_size != want_bs)
    return internal_error("executor KV block size " + std::to_string(kv.block_size) +
                          " differs from the engine's " + std::to_string(want_bs));
  if (kv.num_blocks < 1) return invalid_argument("the KV cache has no blocks");
  // Paged mode frees the blocks that fell out of a window every layer slides (vLLM V1's
  // SlidingWindowManager; it reserves a null block for them, so a pool of one block keeps all).
  // Token mode keeps every slot until the request ends. FOLIO_KV_WINDOW_FREE=0 (a measuring
  // switch) keeps them in paged mode too.
  FOLIO_ASSIGN_OR_RETURN(const int window_free, env_int("FOLIO_KV_WINDOW_FREE", 1, 0, 1));
  EngineConfig c = config;
  c.sched.sliding_window = config.kv_mode == KvCacheMode::kPaged && kv.num_blocks > 1 && window_free
                               ? model.kv_window()
                               : 0;
  auto manager = make_kv_cache_manager(c, kv.num_blocks, kv.num_swap_blocks);
  std::unique_ptr<EngineCore> core(
      new EngineCore(c, model, std::move(executor), std::move(tokenizer), std::move(manager)));
  if (core->async_enabled_)
    log_info("async scheduling: on (the next step is prepared while the device runs one)");
  else if (config.async_scheduling)
    log_debug("async scheduling: off (" + core->executor_->device_name() +
              (config.device_sampling ? " does not launch steps asynchronously)"
                                      : ": --no-device-sampling)"));
  return core;
}

EngineCore::EngineCore(const EngineConfig& config, const ModelConfig& model,
                       std::unique_ptr<Executor> executor,
                       std::shared_ptr<const Tokenizer> tokenizer,
                       std::unique_ptr<KvCacheManager> kv)
    : config_(config),
      model_(model),
      executor_(std::move(executor)),
      tokenizer_(std::move(tokenizer)),
      kv_(std::move(kv)),
      scheduler_(std::make_unique<Scheduler>(config.sched, *kv_)),
      sampler_(SamplerConfig{model.vocab_size, model.generation.eos_token_ids}),
      penalty_ws_(model.vocab_size),
      async_enabled_(config.async_scheduling && config.device_sampling &&
                     executor_->samples_on_device() && executor_->launches_async()) {}

EngineCore::~EngineCore() = default;

int64_t EngineCore::kv_capacity_tokens() const {
  return static_cast<int64_t>(kv_->num_total_blocks()) * kv_->block_size();
}

// Fields a request leaves unset take the model's generation_config.json values (as vLLM).
void EngineCore::apply_defaults(SamplingParams& p) const {
  const auto& g = model_.generation;
  if (!p.has_temperature && g.temperature) p.temperature = *g.temperature;
  if (!p.has_top_p && g.top_p) p.top_p = *g.top_p;
  if (!p.has_top_k && g.top_k) p.top_k = *g.top_k;
  if (!p.has_min_p && g.min_p) p.min_p = *g.min_p;
  if (!p.has_repetition_penalty && g.repetition_penalty)
    p.repetition_penalty = *g.repetition_penalty;
}

Status EngineCore::add_request(GenerateRequest req, Sink sink, bool final_only) {
  if (by_id_.count(req.request_id))
    return invalid_argument("request id \"" + req.request_id + "\" is already live");
  if (req.prompt_token_ids.empty()) return invalid_argument("the prompt is empty");
  const int vocab = model_.vocab_size;
  for (int32_t id : req.prompt_token_ids)
    if (id < 0 || id >= vocab)
      return invalid_argument("prompt token id " + std::to_string(id) +
                              " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
  const int len = static_cast<int>(req.prompt_token_ids.size());
  if (len >= max_model_len())
    return invalid_argument("the prompt has " + std::to_string(len) +
                            " tokens, but the model's maximum context length is " +
                            std::to_string(max_model_len()) + " tokens");
  apply_defaults(req.params);
  FOLIO_RETURN_IF_ERROR(req.params.validate(config_.max_logprobs, vocab));
  auto r = std::make_unique<RequestState>();
  r->gid = next_group_++;
  r->id = req.request_id;
  r->params = req.params;
  r->prompt = req.prompt_token_ids;
  r->sink = std::move(sink);
  r->final_only = final_only;
  r->arrival = req.arrival_time;
  r->rng = make_rng_stream(req.params, config_.seed, r->id, 0);
  r->plp_next = req.params.prompt_logprobs ? 0 : len;
  r->async_safe = async_safe(req.params) && !req.params.prompt_logprobs;
  Request sr;
  sr.id = r->gid;
  sr.prompt = req.prompt_token_ids;
  sr.params = req.params;
  if (req.params.use_beam_search) {
    auto beam = BeamSearch::create(
        BeamSearchConfig::from_params(req.params, model_.generation.eos_token_ids));
    if (!beam.ok()) return beam.status();
    r->beam = std::move(*beam);
    r->final_only = true;  // beams are only final at the end
    sr.params.n = 1;       // the engine forks beams itself
  }
  sr.priority = req.priority;
  // Prompt logprobs need logits at every prompt position, so such a request must not reuse
  // cached prefix blocks: a salt of its own keeps it out of everyone's cache entries.
  sr.cache_salt = req.params.prompt_logprobs ? "\x01plp:" + req.request_id : req.cache_salt;
  FOLIO_RETURN_IF_ERROR(scheduler_->add_request(std::move(sr)));
  counters_.num_requests++;
  counters_.prompt_tokens += len;
  if (!r->async_safe) ++num_sync_only_;
  by_id_[r->id] = r->gid;
  requests_[r->gid] = std::move(r);
  return Status();
}

void EngineCore::abort(const std::string& request_id) {
  auto it = by_id_.find(request_id);
  if (it == by_id_.end()) return;
  GroupId gid = it->second;
  (void)scheduler_->abort_request(gid);
  RequestState& r = *requests_[gid];
  for (auto& o : r.outputs) o->finish("abort");
  if (r.outputs.empty()) {  // aborted before its first token: report index 0 as aborted
    r.outputs.push_back(std::make_unique<SequenceOutput>(0, tokenizer_.get(), r.params,
                                                         model_.generation.eos_token_ids));
    r.outputs[0]->finish("abort");
  }
  emit(r, true);
  finish_request(gid);
}

EngineCore::RequestState* EngineCore::find_by_seq(SeqId seq) {
  auto it = seq_owner_.find(seq);
  if (it == seq_owner_.end()) return nullptr;
  auto r = requests_.find(it->second);
  return r == requests_.end() ? nullptr : r->second.get();
}

void EngineCore::finish_request(GroupId gid) {
  auto it = requests_.find(gid);
  if (it == requests_.end()) return;
  for (const auto& [seq, idx] : it->second->seq_index) seq_owner_.erase(seq);
  if (!it->second->async_safe) --num_sync_only_;
  by_id_.erase(it->second->id);
  requests_.erase(it);
}

}  // namespace folio
