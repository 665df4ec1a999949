// AsyncEngine: the EngineClient the HTTP server talks to. It owns an EngineCore and the one
// engine thread that runs it; every other thread only enqueues (submit, abort) or reads
// snapshots (stats, info, healthy), so no I/O thread ever waits for a model step.
//
// The engine thread loop: take new requests and aborts from the inbox, run one step, publish a
// stats snapshot and a heartbeat; sleep on a condition variable while there is nothing to do.
// A request whose channel was closed by its client is aborted at the next step (its blocks
// freed). healthy() is false once the loop died (an executor error) or has not beaten for
// `stall_timeout` while it has work.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "engine/engine_client.h"
#include "engine/engine_core.h"
#include "tokenizer/chat_template.h"

namespace folio {

class AsyncEngine final : public EngineClient {
 public:
  // `chat_template` may be empty (no chat template: chat requests get a clear error).
  AsyncEngine(std::unique_ptr<EngineCore> core, std::string model_name,
              std::optional<ChatTemplate> chat_template);
  ~AsyncEngine() override;  // stops the engine thread, aborting what is left

  Status submit(GenerateRequest request, std::shared_ptr<OutputChannel> channel) override;
  void abort(const std::string& request_id) override;
  EngineInfo info() const override { return info_; }
  EngineStats stats() const override;
  bool healthy() const override;
  Result<std::vector<int32_t>> encode(std::string_view text,
                                      bool add_special_tokens) const override;
  Result<std::string> decode(std::span<const int32_t> ids, bool skip_special_tokens) const override;
  Result<std::string> apply_chat_template(const ChatTemplateInput& input) const override;

  // Stops the loop after finishing nothing more: live requests end with "abort".
  void shutdown();

 private:
  struct Pending {
    GenerateRequest request;
    std::shared_ptr<OutputChannel> channel;
  };
  void loop();
  void take_inbox();
  void publish_stats();

  std::unique_ptr<EngineCore> core_;  // engine thread only after construction
  std::optional<ChatTemplate> chat_template_;
  EngineInfo info_;
  CacheConfigInfo cache_config_;  // fixed after construction; copied into each stats snapshot
  const Tokenizer* tokenizer_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> inbox_;
  std::deque<std::string> aborts_;
  bool stop_ = false;
  EngineStats stats_;  // guarded by mu_

  std::unordered_map<std::string, std::shared_ptr<OutputChannel>> channels_;  // engine thread
  std::atomic<bool> dead_{false};
  std::atomic<int64_t> heartbeat_ms_{0};
  std::atomic<bool> busy_{false};
  std::thread thread_;
};

}  // namespace folio
