// EngineClient: the contract between the HTTP server's I/O threads and the engine thread.
//
// Threading:
//  - Every EngineClient method may be called from any I/O thread, concurrently. None may wait
//    for an engine step: submit() and abort() enqueue work for the engine thread and return;
//    stats() and info() read a snapshot (atomics or a briefly held lock); the tokenizer calls
//    (encode, decode, apply_chat_template) work on immutable tokenizer state.
//  - Outputs flow back through a per-request OutputChannel. Only the engine thread pushes; only
//    the request's I/O side drains or closes. push() never blocks: the channel is bounded by
//    coalescing (past `capacity` queued outputs a new one is merged into the last one), so a
//    slow client costs memory proportional to its own output only, never engine time.
//  - The channel's notify callback runs on the pushing (engine) thread, under the channel's
//    lock, when the queue turns non-empty or finishes. It must be cheap and non-blocking (post
//    to an executor) and must not call back into the channel. After close() returns, notify is
//    never called again, so the consumer may be destroyed.
//
// Request lifecycle: submit() either fails (non-ok Status, nothing will be pushed) or accepts;
// an accepted request receives zero or more outputs, the last with `finished` set (or an error,
// which is also final). abort(id) makes the engine drop the request at its next step; it may
// still push outputs until then (dropped if the channel is closed) and pushes no error for it.
// Beam search and, at the engine's option, non-streaming requests deliver one final output.
#pragma once

#include "sample/logprobs.h"

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "core/sampling_params.h"

namespace folio {

struct GenerateRequest {
  std::string request_id;                // unique among live requests
  std::vector<int32_t> prompt_token_ids;  // non-empty, every id in [0, vocab_size)
  SamplingParams params;                  // already validated
  int priority = 0;                       // lower runs first under the priority policy
  std::string cache_salt;                 // mixed into prefix-cache hashes when non-empty
  std::chrono::steady_clock::time_point arrival_time = std::chrono::steady_clock::now();
};

// TokenLogprob {token_id, logprob} comes from sample/logprobs.h (logprob may be -inf; the
// server clamps it for JSON).

// Logprobs at one position: the chosen (or prompt) token and the top-K alternatives.
struct PositionLogprobs {
  int32_t token_id = 0;
  float logprob = 0.0f;
  int32_t rank = 1;                // 1-based rank of token_id in the distribution
  std::vector<TokenLogprob> top;   // K entries, logprob descending (K = requested count)
};

// A stop string (matched text) or a stop token id; monostate when eos / length / none.
using StopReason = std::variant<std::monostate, int32_t, std::string>;

// What is new for one sequence (index j of n) since the previous delta for that index.
struct CompletionDelta {
  int index = 0;
  std::vector<int32_t> token_ids;          // new tokens
  std::string text;                        // new text; stop strings already trimmed or kept
  std::vector<PositionLogprobs> logprobs;  // one per token in token_ids iff logprobs requested
  double cumulative_logprob = 0.0;         // over the whole sequence so far
  std::optional<std::string> finish_reason;  // "stop" | "length" | "abort" once done
  StopReason stop_reason;
};

struct RequestOutput {
  std::vector<CompletionDelta> deltas;  // only sequences with news
  bool finished = false;                // every sequence done: the last output
  int num_prompt_tokens = 0;
  int num_cached_prompt_tokens = 0;     // prompt tokens served from the prefix cache
  int num_generated_tokens = 0;         // over all sequences, so far
  // Set once (the first output) when prompt_logprobs was requested: one per prompt token, the
  // first nullopt (nothing precedes it).
  std::vector<std::optional<PositionLogprobs>> prompt_logprobs;
  std::optional<double> queue_time_s;  // arrival to first scheduled, set once known
  Status error;                        // non-ok: the request failed; implies finished
};

// Merges `later` into `earlier` as if both had been one output: per index, tokens, text and
// logprobs append; finish state, counters and cumulative_logprob take the later values.
inline void merge_output(RequestOutput& earlier, RequestOutput&& later) {
  for (auto& d : later.deltas) {
    CompletionDelta* into = nullptr;
    for (auto& e : earlier.deltas)
      if (e.index == d.index) into = &e;
    if (into == nullptr) {
      earlier.deltas.push_back(std::move(d));
      continue;
    }
    into->token_ids.insert(into->token_ids.end(), d.token_ids.begin(), d.token_ids.end());
    into->text += d.text;
    for (auto& lp : d.logprobs) into->logprobs.push_back(std::move(lp));
    into->cumulative_logprob = d.cumulative_logprob;
    if (d.finish_reason) into->finish_reason = std::move(d.finish_reason);
    if (!std::holds_alternative<std::monostate>(d.stop_reason))
      into->stop_reason = std::move(d.stop_reason);
  }
  earlier.finished = earlier.finished || later.finished;
  earlier.num_prompt_tokens = later.num_prompt_tokens;
  earlier.num_cached_prompt_tokens = later.num_cached_prompt_tokens;
  earlier.num_generated_tokens = later.num_generated_tokens;
  if (earlier.prompt_logprobs.empty()) earlier.prompt_logprobs = std::move(later.prompt_logprobs);
  if (!earlier.queue_time_s) earlier.queue_time_s = later.queue_time_s;
  if (!later.error.ok()) earlier.error = std::move(later.error);
}

// One request's outputs, engine thread -> I/O side. See the threading contract above.
class OutputChannel {
 public:
  using Notify = std::function<void()>;
  OutputChannel(size_t capacity, Notify notify)
      : capacity_(capacity < 1 ? 1 : capacity), notify_(std::move(notify)) {}

  // Engine thread. Returns false (and drops the output) once the consumer closed the channel
  // or after a finished output was pushed: the engine may then stop the request.
  bool push(RequestOutput output) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || finished_) return false;
    finished_ = output.finished || !output.error.ok();
    const bool was_empty = queue_.empty();
    if (queue_.size() >= capacity_)
      merge_output(queue_.back(), std::move(output));
    else
      queue_.push_back(std::move(output));
    // Edge-triggered: a non-empty queue already has a wake-up pending, and the consumer drains
    // everything per wake-up. The final output always wakes it.
    if (notify_ && (was_empty || finished_)) notify_();
    return true;
  }

  // Consumer: takes every queued output, oldest first.
  std::vector<RequestOutput> drain() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<RequestOutput> out(std::make_move_iterator(queue_.begin()),
                                   std::make_move_iterator(queue_.end()));
    queue_.clear();
    return out;
  }

  // Consumer: wants nothing more. Drops queued outputs and the callback; idempotent.
  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    queue_.clear();
    notify_ = nullptr;
  }

  bool closed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_;
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.size();
  }

 private:
  mutable std::mutex mu_;
  const size_t capacity_;
  Notify notify_;
  std::deque<RequestOutput> queue_;
  bool closed_ = false;
  bool finished_ = false;
};

struct EngineInfo {
  std::string model_name;  // what the engine loaded (the server may serve it under another name)
  int max_model_len = 0;   // prompt + generated tokens per sequence
  int vocab_size = 0;
  std::vector<int32_t> eos_token_ids;
  int64_t kv_capacity_tokens = 0;
  int max_logprobs = 20;
};

// The KV cache's configuration, fixed once the engine has started (vLLM's CacheConfig as its
// `cache_config_info` gauge shows it). The server renders it as folio:cache_config_info.
struct CacheConfigInfo {
  int block_size = 0;                   // tokens per KV block (1 in token mode)
  std::string cache_dtype = "auto";     // kv_cache_dtype_name(): "auto" | "fp8_e4m3"
  std::string kv_cache_mode = "paged";  // "paged" | "token"
  int num_gpu_blocks = 0;  // the KV pool's blocks (slots in token mode), whatever the device
  int num_cpu_blocks = 0;  // host swap pool blocks (0: no swap space)
  bool enable_prefix_caching = false;
};

// A snapshot; counters are monotonic since start.
struct EngineStats {
  int num_running = 0;
  int num_waiting = 0;
  double kv_cache_usage = 0.0;  // [0, 1]
  uint64_t prefix_cache_queries = 0;  // tokens looked up
  uint64_t prefix_cache_hits = 0;     // tokens found
  uint64_t num_preemptions = 0;
  uint64_t prompt_tokens = 0;      // prefill tokens computed
  uint64_t generation_tokens = 0;  // tokens sampled
  // Fixed after startup: the engine computes it once and copies it into every snapshot (short
  // strings, no allocation).
  CacheConfigInfo cache_config;
};

struct ChatTemplateInput {
  nlohmann::json messages;  // [{"role": str, "content": str}, ...], content already flattened
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  nlohmann::json kwargs = nlohmann::json::object();  // chat_template_kwargs, passed through
};

class EngineClient {
 public:
  virtual ~EngineClient() = default;

  // Accepts the request (outputs will follow on `channel`) or refuses it with no output:
  // kInvalidArgument (bad request), kResourceExhausted (engine queue full), kInternal.
  virtual Status submit(GenerateRequest request, std::shared_ptr<OutputChannel> channel) = 0;
  // Drops a live request at the engine's next step; unknown or finished ids are ignored.
  virtual void abort(const std::string& request_id) = 0;

  virtual EngineInfo info() const = 0;
  virtual EngineStats stats() const = 0;
  virtual bool healthy() const = 0;

  virtual Result<std::vector<int32_t>> encode(std::string_view text,
                                              bool add_special_tokens) const = 0;
  // May return text with U+FFFD where ids end inside a UTF-8 sequence.
  virtual Result<std::string> decode(std::span<const int32_t> token_ids,
                                     bool skip_special_tokens) const = 0;
  // Renders the chat template; a template that raises becomes a kInvalidArgument with its
  // message (the server answers 400 with it).
  virtual Result<std::string> apply_chat_template(const ChatTemplateInput& input) const = 0;
};

}  // namespace folio
