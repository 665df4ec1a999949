#include "server/generation.h"

#include <algorithm>

namespace folio {
namespace {

using nlohmann::json;

double seconds(Generation::Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

Generation::Generation(GenerationPlan plan, TokenText token_text, ServerMetrics& metrics,
                       Admission& admission)
    : plan_(std::move(plan)),
      token_text_(std::move(token_text)),
      metrics_(metrics),
      admission_(admission),
      subs_(plan_.requests.size()) {
  choices_.reserve(plan_.requests.size() * plan_.n);
  for (size_t k = 0; k < plan_.requests.size() * plan_.n; ++k) choices_.emplace_back(token_text_);
}

Generation::~Generation() {
  for (size_t i = 0; i < subs_.size(); ++i) release(i);
}

void Generation::release(size_t i) {
  if (subs_[i].released) return;
  subs_[i].released = true;
  admission_.release(1);
}

bool Generation::finished() const {
  for (const auto& s : subs_)
    if (!s.finished) return false;
  return true;
}

void Generation::finish_sub(size_t i, const std::string& reason) {
  SubState& s = subs_[i];
  if (s.finished) return;
  s.finished = true;
  release(i);
  const auto now = Clock::now();
  ServerMetrics::RequestRecord r;
  r.finished_reason = reason;
  r.e2e_s = seconds(now - plan_.requests[i].arrival_time);
  if (s.any_token) {
    r.ttft_s = seconds(s.first_token - plan_.requests[i].arrival_time);
    int per_seq = 0;
    for (int j = 0; j < plan_.n; ++j)
      per_seq = std::max(per_seq, choices_[i * plan_.n + j].num_tokens);
    if (per_seq > 1) r.tpot_s = seconds(s.last_token - s.first_token) / (per_seq - 1);
  }
  if (s.queue_s) r.queue_s = *s.queue_s;
  metrics_.record_request(r);
}

std::string Generation::on_output(size_t i, RequestOutput out) {
  SubState& s = subs_[i];
  if (s.finished) return "";
  release(i);  // any output means the engine has started it
  s.prompt_tokens = out.num_prompt_tokens;
  s.cached_tokens = out.num_cached_prompt_tokens;
  s.generated_tokens = out.num_generated_tokens;
  if (!out.prompt_logprobs.empty() && s.prompt_logprobs.empty())
    s.prompt_logprobs = std::move(out.prompt_logprobs);
  if (out.queue_time_s && !s.queue_s) s.queue_s = out.queue_time_s;
  if (!out.error.ok()) {
    if (!error_) error_ = error_from_status(out.error);
    finish_sub(i, "error");
    return "";
  }
  const auto now = Clock::now();
  std::string events;
  for (auto& d : out.deltas) {
    if (d.index < 0 || d.index >= plan_.n) continue;  // an engine bug; never index out of range
    if (!d.token_ids.empty()) {
      if (!s.any_token) s.first_token = now;
      s.any_token = true;
      s.last_token = now;
    }
    if (d.finish_reason) s.last_finish_reason = *d.finish_reason;
    events += on_delta(i, d);
  }
  if (out.finished) finish_sub(i, s.last_finish_reason.empty() ? "stop" : s.last_finish_reason);
  if (!events.empty()) streamed_anything_ = true;
  return events;
}

std::string Generation::start_choice(size_t i, ChoiceState& c) {
  c.started = true;
  if (plan_.kind == ApiKind::kChat) {
    if (!plan_.stream) return "";
    json delta = {{"role", "assistant"}, {"content", ""}};
    return sse_event(chunk(chat_stream_choice(&c - choices_.data(), delta, nullptr, c), nullptr));
  }
  if (!plan_.echo) return "";
  // Echo: the prompt text leads the choice, with its logprobs when the engine sent them.
  const std::string& echo = plan_.echo_text[i];
  c.text = echo;
  if (plan_.logprobs) {
    const auto& plp = subs_[i].prompt_logprobs;
    const auto& ids = plan_.requests[i].prompt_token_ids;
    if (plp.size() == ids.size()) {
      for (size_t k = 0; k < ids.size(); ++k) c.completion_logprobs.add_prompt(ids[k], plp[k]);
    } else {
      c.completion_logprobs.skip_text(echo.size());
    }
  }
  return "";  // streamed with the first delta's text
}

std::string Generation::on_delta(size_t i, CompletionDelta& d) {
  const size_t index = i * plan_.n + d.index;
  ChoiceState& c = choices_[index];
  std::string events;
  std::string text;
  if (!c.started) {
    events += start_choice(i, c);
    if (plan_.kind == ApiKind::kCompletion && plan_.echo) text = plan_.echo_text[i];
  }
  text += d.text;
  c.num_tokens += static_cast<int>(d.token_ids.size());
  if (d.finish_reason) {
    c.finish_reason = d.finish_reason;
    c.stop_reason = d.stop_reason;
  }
  const bool completion = plan_.kind == ApiKind::kCompletion;
  if (plan_.logprobs) {
    for (const auto& p : d.logprobs) {
      if (completion) c.completion_logprobs.add(p);
      else if (!plan_.stream) c.chat_logprobs.push_back(p);
    }
  }
  if (!plan_.stream) {
    c.text += d.text;
    return events;
  }
  if (text.empty() && d.token_ids.empty() && !d.finish_reason) return events;
  json usage;
  if (plan_.continuous_usage) usage = sub_usage(i);
  const json* u = plan_.continuous_usage ? &usage : nullptr;
  if (completion) {
    json lp = plan_.logprobs ? c.completion_logprobs.take() : json(nullptr);
    events += sse_event(chunk(completion_choice(index, text, std::move(lp), c), u));
  } else {
    json delta = text.empty() ? json::object() : json{{"content", text}};
    json lp = plan_.logprobs ? chat_logprobs_json(d.logprobs, token_text_) : json(nullptr);
    events += sse_event(chunk(chat_stream_choice(index, std::move(delta), std::move(lp), c), u));
  }
  return events;
}

std::vector<std::string> Generation::abort_unfinished(bool emit, std::string* events) {
  std::vector<std::string> ids;
  for (size_t i = 0; i < subs_.size(); ++i) {
    if (subs_[i].finished) continue;
    ids.push_back(plan_.requests[i].request_id);
    for (int j = 0; j < plan_.n; ++j) {
      ChoiceState& c = choices_[i * plan_.n + j];
      if (c.finish_reason) continue;
      CompletionDelta d;
      d.index = j;
      d.finish_reason = "abort";
      std::string ev = on_delta(i, d);
      if (emit && events) *events += ev;
    }
    finish_sub(i, "abort");
  }
  return ids;
}

json Generation::chunk(json choice, const json* usage) const {
  json out = {{"id", plan_.response_id},
              {"object", plan_.kind == ApiKind::kChat ? "chat.completion.chunk" : "text_completion"},
              {"created", plan_.created},
              {"model", plan_.model},
              {"choices", json::array({std::move(choice)})}};
  if (usage) out["usage"] = *usage;
  return out;
}

json Generation::completion_choice(size_t index, std::string text, json logprobs,
                                   const ChoiceState& c) const {
  return {{"index", index},
          {"text", std::move(text)},
          {"logprobs", std::move(logprobs)},
          {"finish_reason", finish_reason_json(c.finish_reason)},
          {"stop_reason", stop_reason_json(c.stop_reason)}};
}

json Generation::chat_stream_choice(size_t index, json delta, json logprobs,
                                    const ChoiceState& c) const {
  const bool first = delta.contains("role");  // the role chunk never carries a finish
  return {{"index", index},
          {"delta", std::move(delta)},
          {"logprobs", std::move(logprobs)},
          {"finish_reason", first ? json(nullptr) : finish_reason_json(c.finish_reason)},
          {"stop_reason", first ? json(nullptr) : stop_reason_json(c.stop_reason)}};
}

json Generation::sub_usage(size_t i) const {
  const SubState& s = subs_[i];
  return usage_json(s.prompt_tokens, s.generated_tokens, s.cached_tokens);
}

json Generation::usage() const {
  int prompt = 0, completion = 0, cached = 0;
  for (const auto& s : subs_) {
    prompt += s.prompt_tokens;
    completion += s.generated_tokens;
    cached += s.cached_tokens;
  }
  return usage_json(prompt, completion, cached);
}

std::string Generation::stream_tail() const {
  std::string out;
  if (error_) out += sse_event(json::parse(error_->body(), nullptr, false));
  if (plan_.include_usage) {
    json u = {{"id", plan_.response_id},
              {"object", plan_.kind == ApiKind::kChat ? "chat.completion.chunk" : "text_completion"},
              {"created", plan_.created},
              {"model", plan_.model},
              {"choices", json::array()},
              {"usage", usage()}};
    out += sse_event(u);
  }
  return out + kSseDone;
}

std::string Generation::final_body() {
  json choices = json::array();
  const bool chat = plan_.kind == ApiKind::kChat;
  for (size_t k = 0; k < choices_.size(); ++k) {
    const ChoiceState& c = choices_[k];
    // A choice the engine never reported on (e.g. aborted at once) still shows its prompt.
    std::string text = c.started || !plan_.echo || chat ? c.text : plan_.echo_text[k / plan_.n];
    if (chat) {
      json lp = plan_.logprobs ? chat_logprobs_json(c.chat_logprobs, token_text_) : json(nullptr);
      choices.push_back({{"index", k},
                         {"message", {{"role", "assistant"}, {"content", std::move(text)}}},
                         {"logprobs", std::move(lp)},
                         {"finish_reason", finish_reason_json(c.finish_reason)},
                         {"stop_reason", stop_reason_json(c.stop_reason)}});
    } else {
      json lp = plan_.logprobs ? choices_[k].completion_logprobs.take()
                               : json(nullptr);
      json choice = completion_choice(k, std::move(text), std::move(lp), c);
      const auto& plp = subs_[k / plan_.n].prompt_logprobs;
      choice["prompt_logprobs"] = plp.empty() ? json(nullptr) : prompt_logprobs_json(plp, token_text_);
      choices.push_back(std::move(choice));
    }
  }
  json out = {{"id", plan_.response_id},
              {"object", chat ? "chat.completion" : "text_completion"},
              {"created", plan_.created},
              {"model", plan_.model},
              {"choices", std::move(choices)},
              {"usage", usage()}};
  return dump_json(out);
}

}  // namespace folio
