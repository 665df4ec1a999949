#include "server/request_common.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "server/utf8.h"

namespace folio {
namespace {

using nlohmann::json;

ApiError invalid_value(const std::string& message, const char* param) {
  return bad_request(message, param, "invalid_value");
}

MaybeError parse_stop(const json& body, const ServerConfig& config, SamplingParams& p) {
  if (has_field(body, "stop")) {
    const json& v = body.at("stop");
    if (v.is_string()) {
      p.stop = {v.get<std::string>()};
    } else if (v.is_array()) {
      for (const auto& s : v) {
        if (!s.is_string()) return bad_request("'stop' must be a string or a list of strings",
                                               "stop", "invalid_type");
        p.stop.push_back(s.get<std::string>());
      }
    } else {
      return bad_request("'stop' must be a string or a list of strings, got " +
                             json_type_name(v), "stop", "invalid_type");
    }
    if (static_cast<int>(p.stop.size()) > config.max_stop_strings)
      return invalid_value("'stop' holds " + std::to_string(p.stop.size()) +
                               " strings, more than the limit of " +
                               std::to_string(config.max_stop_strings), "stop");
  }
  if (has_field(body, "stop_token_ids")) {
    const json& v = body.at("stop_token_ids");
    if (!v.is_array())
      return bad_request("'stop_token_ids' must be a list of integers", "stop_token_ids",
                         "invalid_type");
    for (const auto& t : v) {
      int64_t id = 0;
      if (!json_to_int64(t, id) || id < INT32_MIN || id > INT32_MAX)
        return bad_request("'stop_token_ids' must be a list of integers", "stop_token_ids",
                           "invalid_type");
      p.stop_token_ids.push_back(static_cast<int32_t>(id));
    }
  }
  return std::nullopt;
}

MaybeError parse_logit_bias(const json& body, SamplingParams& p) {
  json bias;
  FOLIO_API_TRY(read_object(body, "logit_bias", bias));
  for (const auto& [key, value] : bias.items()) {
    char* end = nullptr;
    long long id = std::strtoll(key.c_str(), &end, 10);
    if (key.empty() || *end != '\0' || id < INT32_MIN || id > INT32_MAX)
      return bad_request("'logit_bias' keys must be token ids, got '" + key + "'", "logit_bias",
                         "invalid_value");
    if (!value.is_number())
      return bad_request("'logit_bias' values must be numbers", "logit_bias", "invalid_type");
    // OpenAI's range; vLLM clamps the same way.
    p.logit_bias[static_cast<int32_t>(id)] = std::clamp(value.get<float>(), -100.0f, 100.0f);
  }
  return std::nullopt;
}

MaybeError parse_penalties_and_filters(const json& body, SamplingParams& p) {
  p.has_temperature = has_field(body, "temperature");
  p.has_top_p = has_field(body, "top_p");
  p.has_top_k = has_field(body, "top_k");
  p.has_min_p = has_field(body, "min_p");
  p.has_repetition_penalty = has_field(body, "repetition_penalty");
  FOLIO_API_TRY(read_float(body, "temperature", p.temperature));
  FOLIO_API_TRY(read_float(body, "top_p", p.top_p));
  FOLIO_API_TRY(read_int(body, "top_k", p.top_k));
  if (p.top_k == 0) p.top_k = -1;  // vLLM: 0 also means off
  FOLIO_API_TRY(read_float(body, "min_p", p.min_p));
  FOLIO_API_TRY(read_float(body, "repetition_penalty", p.repetition_penalty));
  FOLIO_API_TRY(read_float(body, "presence_penalty", p.presence_penalty));
  FOLIO_API_TRY(read_float(body, "frequency_penalty", p.frequency_penalty));
  FOLIO_API_TRY(read_float(body, "length_penalty", p.length_penalty));
  return std::nullopt;
}

ApiError context_error(int max_len, int prompt_len, std::optional<int> max_tokens,
                       const char* what) {
  std::string m = "This model's maximum context length is " + std::to_string(max_len) +
                  " tokens. However, ";
  if (max_tokens) {
    m += "you requested " + std::to_string(prompt_len + static_cast<int64_t>(*max_tokens)) +
         " tokens (" + std::to_string(prompt_len) + " in the " + what + ", " +
         std::to_string(*max_tokens) + " in the completion). Please reduce the length of the " +
         what + " or completion.";
  } else {
    m += "your request has " + std::to_string(prompt_len) + " input tokens. Please reduce the "
         "length of the " + std::string(what) + ".";
  }
  return bad_request(m, max_tokens ? "max_tokens" : what, "context_length_exceeded");
}

}  // namespace

MaybeError parse_json_body(std::string_view body, json& out) {
  if (body.empty()) return bad_request("the request body is empty", "", "invalid_json");
  if (!server::is_valid_utf8(body))
    return bad_request("the request body is not valid UTF-8", "", "invalid_json");
  out = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (out.is_discarded()) return bad_request("the request body is not valid JSON", "",
                                             "invalid_json");
  if (!out.is_object())
    return bad_request("the request body must be a JSON object", "", "invalid_json");
  return std::nullopt;
}

MaybeError check_model(const json& body, const ParseContext& ctx) {
  std::string model;
  FOLIO_API_TRY(read_string(body, "model", model));
  if (!model.empty() && model != ctx.served_model)
    return ApiError{404, "The model `" + model + "` does not exist.", "model",
                    "model_not_found"};
  return std::nullopt;
}

MaybeError parse_sampling_fields(const json& body, const ServerConfig& config,
                                 SamplingParams& p) {
  FOLIO_API_TRY(read_int(body, "n", p.n));
  if (p.n < 1 || p.n > config.max_n)
    return invalid_value("'n' must be in [1, " + std::to_string(config.max_n) + "], got " +
                             std::to_string(p.n), "n");
  FOLIO_API_TRY(read_int(body, "best_of", p.best_of));
  if (p.best_of && (*p.best_of < p.n || *p.best_of > config.max_n))
    return invalid_value("'best_of' must be in [n, " + std::to_string(config.max_n) + "]",
                         "best_of");
  FOLIO_API_TRY(parse_penalties_and_filters(body, p));
  FOLIO_API_TRY(parse_logit_bias(body, p));
  std::optional<int64_t> seed;
  FOLIO_API_TRY(read_int64(body, "seed", seed));
  if (seed) p.seed = static_cast<uint64_t>(*seed);
  FOLIO_API_TRY(read_int(body, "min_tokens", p.min_tokens));
  FOLIO_API_TRY(read_bool(body, "ignore_eos", p.ignore_eos));
  FOLIO_API_TRY(read_bool(body, "include_stop_str_in_output", p.include_stop_str_in_output));
  FOLIO_API_TRY(read_bool(body, "skip_special_tokens", p.skip_special_tokens));
  FOLIO_API_TRY(read_int(body, "prompt_logprobs", p.prompt_logprobs));
  FOLIO_API_TRY(read_bool(body, "use_beam_search", p.use_beam_search));
  FOLIO_API_TRY(read_bool(body, "early_stopping", p.early_stopping));
  return parse_stop(body, config, p);
}

MaybeError parse_stream_and_extras(const json& body, GenerationPlan& plan, int& priority,
                                   std::string& cache_salt) {
  FOLIO_API_TRY(read_bool(body, "stream", plan.stream));
  if (has_field(body, "stream_options")) {
    if (!plan.stream)
      return bad_request("'stream_options' is only allowed when 'stream' is true",
                         "stream_options", "invalid_value");
    json opts;
    FOLIO_API_TRY(read_object(body, "stream_options", opts));
    FOLIO_API_TRY(read_bool(opts, "include_usage", plan.include_usage));
    FOLIO_API_TRY(read_bool(opts, "continuous_usage_stats", plan.continuous_usage));
  }
  FOLIO_API_TRY(read_int(body, "priority", priority));
  FOLIO_API_TRY(read_string(body, "cache_salt", cache_salt));
  return std::nullopt;
}

MaybeError finalize_prompt(const ParseContext& ctx, const std::vector<int32_t>& prompt,
                           std::optional<int> max_tokens, const char* what,
                           SamplingParams& params) {
  if (prompt.empty()) return invalid_value(std::string("the ") + what + " is empty", what);
  for (int32_t id : prompt)
    if (id < 0 || id >= ctx.info.vocab_size)
      return invalid_value("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                               std::to_string(ctx.info.vocab_size) + ")", what);
  const int len = static_cast<int>(prompt.size());
  const int max_len = ctx.info.max_model_len;
  if (len >= max_len) return context_error(max_len, len, std::nullopt, what);
  if (max_tokens && *max_tokens >= 1 && static_cast<int64_t>(len) + *max_tokens > max_len)
    return context_error(max_len, len, max_tokens, what);
  params.max_tokens = max_tokens ? *max_tokens : max_len - len;
  const int max_logprobs = std::min(ctx.config.max_logprobs, ctx.info.max_logprobs);
  Status st = params.validate(max_logprobs, ctx.info.vocab_size);
  if (!st.ok()) return invalid_value(st.message(), "");
  return std::nullopt;
}

std::string make_response_id(const char* prefix) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return std::string(prefix) + buf;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace folio
