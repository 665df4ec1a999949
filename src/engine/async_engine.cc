#include "engine/async_engine.h"

#include <chrono>

#include "base/log.h"

namespace folio {
namespace {
int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
constexpr int64_t kStallTimeoutMs = 30000;
}  // namespace

AsyncEngine::AsyncEngine(std::unique_ptr<EngineCore> core, std::string model_name,
                         std::optional<ChatTemplate> chat_template)
    : core_(std::move(core)),
      chat_template_(std::move(chat_template)),
      tokenizer_(core_->tokenizer()) {
  info_.model_name = std::move(model_name);
  info_.max_model_len = core_->max_model_len();
  info_.vocab_size = core_->model_config().vocab_size;
  info_.eos_token_ids = core_->model_config().generation.eos_token_ids;
  info_.kv_capacity_tokens = core_->kv_capacity_tokens();
  info_.max_logprobs = core_->config().max_logprobs;
  const KvCacheShape& kv_shape = core_->executor().kv_shape();
  cache_config_.block_size = core_->kv().block_size();
  cache_config_.cache_dtype = kv_cache_dtype_name(kv_shape.dtype);
  cache_config_.kv_cache_mode = core_->config().kv_mode == KvCacheMode::kToken ? "token" : "paged";
  cache_config_.num_gpu_blocks = core_->kv().num_total_blocks();
  cache_config_.num_cpu_blocks = kv_shape.num_swap_blocks;
  cache_config_.enable_prefix_caching = core_->config().enable_prefix_caching;
  heartbeat_ms_ = now_ms();
  publish_stats();
  thread_ = std::thread([this] { loop(); });
}

AsyncEngine::~AsyncEngine() {
  shutdown();
}

void AsyncEngine::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status AsyncEngine::submit(GenerateRequest request, std::shared_ptr<OutputChannel> channel) {
  if (dead_) return internal_error("the engine loop has stopped");
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return resource_exhausted("the engine is shutting down");
  inbox_.push_back({std::move(request), std::move(channel)});
  cv_.notify_one();
  return Status();
}

void AsyncEngine::abort(const std::string& request_id) {
  std::lock_guard<std::mutex> lock(mu_);
  aborts_.push_back(request_id);
  cv_.notify_one();
}

EngineStats AsyncEngine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

bool AsyncEngine::healthy() const {
  if (dead_) return false;
  return !busy_ || now_ms() - heartbeat_ms_.load() < kStallTimeoutMs;
}

Result<std::vector<int32_t>> AsyncEngine::encode(std::string_view text, bool add_special) const {
  if (!tokenizer_) return unimplemented("the model folder has no tokenizer.json");
  return tokenizer_->encode(text, add_special);
}

Result<std::string> AsyncEngine::decode(std::span<const int32_t> ids, bool skip_special) const {
  if (!tokenizer_) return unimplemented("the model folder has no tokenizer.json");
  for (int32_t id : ids)
    if (id < 0 || id >= info_.vocab_size)
      return invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary");
  return tokenizer_->decode(ids, skip_special);
}

Result<std::string> AsyncEngine::apply_chat_template(const ChatTemplateInput& in) const {
  if (!chat_template_)
    return invalid_argument("the model has no chat template; pass --chat-template FILE");
  if (!tokenizer_) return unimplemented("the model folder has no tokenizer.json");
  nlohmann::json kwargs = in.kwargs.is_object() ? in.kwargs : nlohmann::json::object();
  bool add_gen = in.add_generation_prompt && !in.continue_final_message;
  auto text = chat_template_->render(in.messages, add_gen, kwargs, tokenizer_->bos_token(),
                                     tokenizer_->eos_token());
  if (!text.ok()) return invalid_argument(text.status().message());
  if (in.continue_final_message && !in.messages.empty() && in.messages.back().contains("content") &&
      in.messages.back()["content"].is_string()) {
    // Cut everything the template appended after the final message's content (vLLM/HF).
    const std::string last = in.messages.back()["content"].get<std::string>();
    size_t at = text->rfind(last);
    if (at != std::string::npos) text->resize(at + last.size());
  }
  return text;
}

void AsyncEngine::take_inbox() {
  std::deque<Pending> inbox;
  std::deque<std::string> aborts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox.swap(inbox_);
    aborts.swap(aborts_);
  }
  for (auto& p : inbox) {
    const std::string id = p.request.request_id;
    const bool final_only = p.request.params.use_beam_search;  // beams arrive in one output
    auto channel = p.channel;
    Status st = core_->add_request(
        std::move(p.request), [channel](RequestOutput&& o) { channel->push(std::move(o)); },
        final_only);
    if (!st.ok()) {
      RequestOutput out;
      out.finished = true;
      out.error = st;
      channel->push(std::move(out));
      continue;
    }
    channels_[id] = channel;
  }
  for (const auto& id : aborts) core_->abort(id);
  // A client that went away closed its channel: stop spending steps on it.
  for (auto it = channels_.begin(); it != channels_.end();) {
    if (it->second->closed()) core_->abort(it->first);
    if (it->second->closed() || !core_->is_live(it->first))
      it = channels_.erase(it);
    else
      ++it;
  }
}

void AsyncEngine::publish_stats() {
  EngineStats s;
  s.num_running = core_->scheduler().num_running();
  s.num_waiting = core_->scheduler().num_waiting() + core_->scheduler().num_swapped();
  s.kv_cache_usage = core_->kv().usage();
  s.prefix_cache_queries = core_->kv().stats().prefix_query_tokens;
  s.prefix_cache_hits = core_->kv().stats().prefix_hit_tokens;
  s.num_preemptions = core_->scheduler().stats().num_preemptions;
  s.prompt_tokens = core_->counters().prompt_tokens;
  s.generation_tokens = core_->counters().generated_tokens;
  s.cache_config = cache_config_;
  std::lock_guard<std::mutex> lock(mu_);
  stats_ = s;
}

void AsyncEngine::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] {
        return stop_ || !inbox_.empty() || !aborts_.empty() || core_->has_unfinished();
      });
      if (stop_) break;
    }
    busy_ = true;
    take_inbox();
    if (core_->has_unfinished()) {
      Status st = core_->step();
      if (!st.ok()) {
        log_error("engine step failed: " + st.message());
        dead_ = true;
        break;
      }
    }
    heartbeat_ms_ = now_ms();
    publish_stats();
    busy_ = core_->has_unfinished();
  }
  // Whatever is left ends as aborted (or with an error if the loop died).
  take_inbox();
  for (auto& [id, ch] : channels_) core_->abort(id);
  channels_.clear();
  publish_stats();
}

}  // namespace folio
