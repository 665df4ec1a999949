// Generation: the response side of one /v1/completions or /v1/chat/completions request,
// independent of sockets. It consumes RequestOutputs of its engine requests (sub-request i is
// plan.requests[i]) and produces SSE events (streaming) or the final JSON body, with usage,
// logprobs and finish reasons in OpenAI's shapes. It also releases admission slots when a
// sub-request starts producing output and records latency metrics when one ends.
// Not thread-safe: one HttpSession drives it on its strand.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "server/admission.h"
#include "server/api_error.h"
#include "server/generation_plan.h"
#include "server/response_format.h"
#include "server/server_metrics.h"

namespace folio {

class Generation {
 public:
  using Clock = std::chrono::steady_clock;
  // Assumes `plan.requests.size()` admission slots were acquired; releases them as they start.
  Generation(GenerationPlan plan, TokenText token_text, ServerMetrics& metrics,
             Admission& admission);
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  const GenerationPlan& plan() const { return plan_; }

  // Feeds one output of sub-request `i`. Streaming: returns the SSE events to send now.
  std::string on_output(size_t i, RequestOutput out);
  // Ends every unfinished sub-request with finish_reason "abort" and returns their ids (for
  // EngineClient::abort). With `emit`, streaming gets one final chunk per unfinished choice
  // in `*events`.
  std::vector<std::string> abort_unfinished(bool emit, std::string* events);

  bool finished() const;
  // A failure (engine error) ends the whole request; nothing streamed yet = answer it as HTTP.
  const std::optional<ApiError>& error() const { return error_; }
  bool streamed_anything() const { return streamed_anything_; }
  // Streaming epilogue: an in-band error event if failed, the usage chunk, then [DONE].
  std::string stream_tail() const;
  // Non-streaming body, once finished() and without error.
  std::string final_body();

 private:
  struct SubState {
    bool finished = false;
    bool released = false;  // its admission slot
    int prompt_tokens = 0, cached_tokens = 0, generated_tokens = 0;
    std::vector<std::optional<PositionLogprobs>> prompt_logprobs;
    std::optional<double> queue_s;
    bool any_token = false;
    Clock::time_point first_token, last_token;
    std::string last_finish_reason;
  };
  struct ChoiceState {
    explicit ChoiceState(TokenText t) : completion_logprobs(std::move(t)) {}
    std::string text;  // non-streaming: accumulated (echo included)
    CompletionLogprobs completion_logprobs;
    std::vector<PositionLogprobs> chat_logprobs;  // non-streaming chat
    std::optional<std::string> finish_reason;
    StopReason stop_reason;
    bool started = false;  // role chunk / echo emitted
    int num_tokens = 0;
  };

  std::string on_delta(size_t i, CompletionDelta& d);
  std::string start_choice(size_t i, ChoiceState& c);
  nlohmann::json chunk(nlohmann::json choice, const nlohmann::json* usage) const;
  nlohmann::json completion_choice(size_t index, std::string text, nlohmann::json logprobs,
                                   const ChoiceState& c) const;
  nlohmann::json chat_stream_choice(size_t index, nlohmann::json delta, nlohmann::json logprobs,
                                    const ChoiceState& c) const;
  nlohmann::json usage() const;
  nlohmann::json sub_usage(size_t i) const;
  void release(size_t i);
  void finish_sub(size_t i, const std::string& reason);

  GenerationPlan plan_;
  TokenText token_text_;
  ServerMetrics& metrics_;
  Admission& admission_;
  std::vector<SubState> subs_;
  std::vector<ChoiceState> choices_;  // index = sub * n + j
  std::optional<ApiError> error_;
  bool streamed_anything_ = false;
};

}  // namespace folio
