#include "server/response_format.h"

#include <algorithm>

namespace folio {
namespace {

using nlohmann::json;

double clamp_logprob(float lp) { return std::max(static_cast<double>(lp), -9999.0); }

json bytes_json(const std::string& s) {
  json out = json::array();
  for (unsigned char c : s) out.push_back(static_cast<int>(c));
  return out;
}

}  // namespace

json usage_json(int prompt_tokens, int completion_tokens, int cached_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

json stop_reason_json(const StopReason& r) {
  if (const auto* id = std::get_if<int32_t>(&r)) return *id;
  if (const auto* s = std::get_if<std::string>(&r)) return *s;
  return nullptr;
}

json finish_reason_json(const std::optional<std::string>& r) {
  return r ? json(*r) : json(nullptr);
}

void CompletionLogprobs::add_prompt(int32_t token_id, const std::optional<PositionLogprobs>& p) {
  if (!p) {
    // The first prompt token has no logprob; its text still occupies the offsets.
    std::string text = token_text_(token_id);
    tokens_.push_back(text);
    token_logprobs_.push_back(nullptr);
    top_logprobs_.push_back(nullptr);
    text_offset_.push_back(offset_);
    offset_ += text.size();
    return;
  }
  add(*p);
}

void CompletionLogprobs::add(const PositionLogprobs& p) {
  std::string text = token_text_(p.token_id);
  tokens_.push_back(text);
  token_logprobs_.push_back(clamp_logprob(p.logprob));
  json top = json::object();
  for (const auto& t : p.top) top[token_text_(t.token_id)] = clamp_logprob(t.logprob);
  top_logprobs_.push_back(std::move(top));
  text_offset_.push_back(offset_);
  offset_ += text.size();
}

json CompletionLogprobs::take() {
  json out = {{"text_offset", std::move(text_offset_)},
              {"token_logprobs", std::move(token_logprobs_)},
              {"tokens", std::move(tokens_)},
              {"top_logprobs", std::move(top_logprobs_)}};
  tokens_ = token_logprobs_ = top_logprobs_ = text_offset_ = json::array();
  return out;
}

json chat_logprobs_json(const std::vector<PositionLogprobs>& positions,
                        const TokenText& token_text) {
  json content = json::array();
  for (const auto& p : positions) {
    std::string text = token_text(p.token_id);
    json top = json::array();
    for (const auto& t : p.top) {
      std::string tt = token_text(t.token_id);
      top.push_back({{"token", tt}, {"logprob", clamp_logprob(t.logprob)}, {"bytes", bytes_json(tt)}});
    }
    content.push_back({{"token", text},
                       {"logprob", clamp_logprob(p.logprob)},
                       {"bytes", bytes_json(text)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

json prompt_logprobs_json(const std::vector<std::optional<PositionLogprobs>>& positions,
                          const TokenText& token_text) {
  json out = json::array();
  for (const auto& p : positions) {
    if (!p) {
      out.push_back(nullptr);
      continue;
    }
    json entry = json::object();
    entry[std::to_string(p->token_id)] = {{"logprob", clamp_logprob(p->logprob)},
                                          {"rank", p->rank},
                                          {"decoded_token", token_text(p->token_id)}};
    int rank = 1;
    for (const auto& t : p->top) {
      const std::string key = std::to_string(t.token_id);
      if (!entry.contains(key))
        entry[key] = {{"logprob", clamp_logprob(t.logprob)},
                      {"rank", rank},
                      {"decoded_token", token_text(t.token_id)}};
      ++rank;
    }
    out.push_back(std::move(entry));
  }
  return out;
}

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_event(const json& j) { return "data: " + dump_json(j) + "\n\n"; }

}  // namespace folio
