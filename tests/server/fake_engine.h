// FakeEngine: a deterministic EngineClient for the server tests. It runs its own "engine
// thread" that starts queued requests (unless held) and emits one token per sequence every
// `token_delay`, so timing-dependent paths (queued, streaming, disconnects) are real.
//
// Tokenizer: bytes are ids 0..255, 256 = "<s>" (BOS, added with add_special_tokens), 257 =
// "</s>". Sequence j of a request generates letters: token k is 'a' + (k + j) % 26, so the
// expected text of any request is computable independently (expected_text()). Stop strings
// and stop_token_ids are honoured like the real OutputProcessor would. Every abort() is
// recorded; tests wait on it with a bounded deadline.
#pragma once

#include <algorithm>
#include <chrono>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "engine/engine_client.h"

namespace folio::testing {

inline std::string expected_text(int num_tokens, int seq_index = 0) {
  std::string s;
  for (int k = 0; k < num_tokens; ++k) s += static_cast<char>('a' + (k + seq_index) % 26);
  return s;
}

struct FakeEngineOptions {
  int vocab_size = 300;
  int max_model_len = 256;
  std::chrono::milliseconds token_delay{1};
  int max_running = 1000;
  bool hold = false;  // never start requests (they stay waiting)
};

class FakeEngine : public EngineClient {
 public:
  explicit FakeEngine(FakeEngineOptions o = {}) : opts_(o) {
    thread_ = std::thread([this] { loop(); });
  }
  ~FakeEngine() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  Status submit(GenerateRequest request, std::shared_ptr<OutputChannel> channel) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (reject_submits_) return resource_exhausted("fake engine queue is full");
    submitted_.push_back(request);
    Live live;
    live.req = std::move(request);
    live.channel = std::move(channel);
    waiting_.push_back(std::move(live));
    cv_.notify_all();
    return Status();
  }
  void abort(const std::string& request_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_.insert(request_id);
    auto drop = [&](std::vector<Live>& v) {
      v.erase(std::remove_if(v.begin(), v.end(),
                             [&](const Live& l) { return l.req.request_id == request_id; }),
              v.end());
    };
    drop(waiting_);
    drop(running_);
    cv_.notify_all();
  }
  EngineInfo info() const override {
    EngineInfo i;
    i.model_name = "fake-model";
    i.max_model_len = opts_.max_model_len;
    i.vocab_size = opts_.vocab_size;
    i.eos_token_ids = {257};
    i.kv_capacity_tokens = 4096;
    i.max_logprobs = 20;
    return i;
  }
  EngineStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    EngineStats s;
    s.num_running = static_cast<int>(running_.size());
    s.num_waiting = static_cast<int>(waiting_.size());
    s.kv_cache_usage = 0.25;
    s.prefix_cache_queries = 100;
    s.prefix_cache_hits = 40;
    s.num_preemptions = 3;
    s.prompt_tokens = prompt_tokens_;
    s.generation_tokens = generation_tokens_;
    s.cache_config.block_size = 16;  // 256 blocks of 16: kv_capacity_tokens
    s.cache_config.num_gpu_blocks = 256;
    s.cache_config.enable_prefix_caching = true;
    return s;
  }
  bool healthy() const override { return healthy_.load(); }

  Result<std::vector<int32_t>> encode(std::string_view text, bool add_special) const override {
    std::vector<int32_t> ids;
    if (add_special) ids.push_back(256);
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  Result<std::string> decode(std::span<const int32_t> ids, bool skip_special) const override {
    std::string s;
    for (int32_t id : ids) {
      if (id < 256) s += static_cast<char>(id);
      else if (!skip_special) s += id == 256 ? "<s>" : id == 257 ? "</s>" : "<unk>";
    }
    return s;
  }
  Result<std::string> apply_chat_template(const ChatTemplateInput& in) const override {
    std::string s;
    for (const auto& m : in.messages) {
      std::string role = m["role"].get<std::string>();
      if (role == "raise") return invalid_argument("template error: role 'raise' is not allowed");
      s += "<|" + role + "|>" + m["content"].get<std::string>() + "\n";
    }
    if (in.add_generation_prompt) s += "<|assistant|>";
    return s;
  }

  // Test controls and observations.
  void set_healthy(bool h) { healthy_ = h; }
  void set_hold(bool h) {
    std::lock_guard<std::mutex> lock(mu_);
    opts_.hold = h;
    cv_.notify_all();
  }
  void set_reject_submits(bool r) {
    std::lock_guard<std::mutex> lock(mu_);
    reject_submits_ = r;
  }
  std::vector<GenerateRequest> submitted() const {
    std::lock_guard<std::mutex> lock(mu_);
    return submitted_;
  }
  std::set<std::string> aborted() const {
    std::lock_guard<std::mutex> lock(mu_);
    return aborted_;
  }
  // Waits (bounded) until `pred` holds over the submitted list / aborted set.
  bool wait_for(const std::function<bool()>& pred, std::chrono::milliseconds timeout) const {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return pred();
  }

 private:
  struct Seq {
    int k = 0;  // tokens generated
    std::string text;
    bool done = false;
  };
  struct Live {
    GenerateRequest req;
    std::shared_ptr<OutputChannel> channel;
    std::vector<Seq> seqs;
    bool started = false;
    int cached = 0;  // prompt tokens the "prefix cache" served
    std::chrono::steady_clock::time_point next;
  };

  void loop();
  bool step(Live& l);  // emits one token per sequence; true when finished
  PositionLogprobs logprobs_for(int32_t token, int k, int top) const {
    PositionLogprobs p;
    p.token_id = token;
    p.logprob = -0.25f * static_cast<float>(k % 4 + 1);
    p.rank = 1;
    for (int t = 0; t < top; ++t)
      p.top.push_back({static_cast<int32_t>('a' + (token - 'a' + t) % 26),
                       p.logprob - 0.5f * static_cast<float>(t)});
    return p;
  }

  FakeEngineOptions opts_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
  bool quit_ = false;
  bool reject_submits_ = false;
  std::atomic<bool> healthy_{true};
  std::vector<Live> waiting_, running_;
  std::vector<GenerateRequest> submitted_;
  std::set<std::string> aborted_;
  std::set<std::vector<int32_t>> seen_prompts_;
  uint64_t prompt_tokens_ = 0, generation_tokens_ = 0;
};

inline void FakeEngine::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!quit_) {
    while (!opts_.hold && !waiting_.empty() &&
           static_cast<int>(running_.size()) < opts_.max_running) {
      Live l = std::move(waiting_.front());
      waiting_.erase(waiting_.begin());
      l.started = false;
      l.seqs.assign(l.req.params.n, Seq{});
      l.next = std::chrono::steady_clock::now() + opts_.token_delay;
      running_.push_back(std::move(l));
    }
    const auto now = std::chrono::steady_clock::now();
    for (size_t i = 0; i < running_.size();) {
      if (running_[i].next <= now && step(running_[i])) {
        running_.erase(running_.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
    cv_.wait_for(lock, std::chrono::milliseconds(1));
  }
}

inline bool FakeEngine::step(Live& l) {
  const SamplingParams& p = l.req.params;
  l.next += opts_.token_delay;
  RequestOutput out;
  out.num_prompt_tokens = static_cast<int>(l.req.prompt_token_ids.size());
  if (!l.started) {
    l.started = true;
    prompt_tokens_ += l.req.prompt_token_ids.size();
    // A repeated prompt hits the "prefix cache" in whole 16-token blocks.
    if (!seen_prompts_.insert(l.req.prompt_token_ids).second)
      l.cached = out.num_prompt_tokens / 16 * 16;
    out.queue_time_s = 0.001;
    if (p.prompt_logprobs) {
      out.prompt_logprobs.push_back(std::nullopt);
      for (size_t t = 1; t < l.req.prompt_token_ids.size(); ++t)
        out.prompt_logprobs.push_back(logprobs_for(l.req.prompt_token_ids[t], 0, *p.prompt_logprobs));
    }
  }
  out.num_cached_prompt_tokens = l.cached;
  bool all_done = true;
  int generated = 0;
  for (size_t j = 0; j < l.seqs.size(); ++j) {
    Seq& s = l.seqs[j];
    if (!s.done) {
      CompletionDelta d;
      d.index = static_cast<int>(j);
      int32_t tok = 'a' + (s.k + static_cast<int>(j)) % 26;
      d.token_ids = {tok};
      if (p.logprobs) d.logprobs.push_back(logprobs_for(tok, s.k, *p.logprobs));
      ++s.k;
      ++generation_tokens_;
      std::string piece(1, static_cast<char>(tok));
      if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), tok) != p.stop_token_ids.end()) {
        s.done = true;
        d.finish_reason = "stop";
        d.stop_reason = tok;
      } else {
        for (const auto& stop : p.stop) {
          std::string joined = s.text + piece;
          auto pos = joined.find(stop);
          if (pos == std::string::npos) continue;
          size_t keep = p.include_stop_str_in_output ? pos + stop.size() : pos;
          piece = keep > s.text.size() ? joined.substr(s.text.size(), keep - s.text.size()) : "";
          s.done = true;
          d.finish_reason = "stop";
          d.stop_reason = stop;
          break;
        }
      }
      if (!s.done && s.k >= p.max_tokens) {
        s.done = true;
        d.finish_reason = "length";
      }
      d.text = piece;
      s.text += piece;
      d.cumulative_logprob = -0.5 * s.k;
      if (!p.use_beam_search) out.deltas.push_back(std::move(d));
    }
    generated += s.k;
    all_done = all_done && s.done;
  }
  out.num_generated_tokens = generated;
  out.finished = all_done;
  if (p.use_beam_search) {
    if (!all_done) return false;
    // Beam search delivers the whole result in one go.
    for (size_t j = 0; j < l.seqs.size(); ++j) {
      CompletionDelta d;
      d.index = static_cast<int>(j);
      for (int k = 0; k < l.seqs[j].k; ++k) d.token_ids.push_back('a' + (k + static_cast<int>(j)) % 26);
      d.text = l.seqs[j].text;
      d.finish_reason = "length";
      out.deltas.push_back(std::move(d));
    }
  }
  l.channel->push(std::move(out));
  return all_done;
}

}  // namespace folio::testing
