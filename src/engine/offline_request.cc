#include "engine/offline_request.h"

#include <cmath>

namespace folio {
namespace {

using nlohmann::json;

// Typed field readers: a wrong type is an error naming the field; absent or null keeps `out`.
Status get_int(const json& j, const char* key, int& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status();
  if (!it->is_number_integer())
    return invalid_argument(std::string("\"") + key + "\" must be an integer");
  int64_t v = it->get<int64_t>();
  if (v < INT32_MIN || v > INT32_MAX)
    return invalid_argument(std::string("\"") + key + "\" out of range");
  out = static_cast<int>(v);
  return Status();
}
Status get_float(const json& j, const char* key, float& out, bool* set = nullptr) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status();
  if (!it->is_number()) return invalid_argument(std::string("\"") + key + "\" must be a number");
  out = it->get<float>();
  if (set) *set = true;
  return Status();
}
Status get_bool(const json& j, const char* key, bool& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status();
  if (!it->is_boolean()) return invalid_argument(std::string("\"") + key + "\" must be a boolean");
  out = it->get<bool>();
  return Status();
}
Status get_opt_int(const json& j, const char* key, std::optional<int>& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status();
  int v = 0;
  FOLIO_RETURN_IF_ERROR(get_int(j, key, v));
  out = v;
  return Status();
}
Status get_ids(const json& j, const char* key, std::vector<int32_t>& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status();
  if (!it->is_array())
    return invalid_argument(std::string("\"") + key + "\" must be a list of token ids");
  out.clear();
  for (const auto& e : *it) {
    if (!e.is_number_integer() || e.get<int64_t>() < INT32_MIN || e.get<int64_t>() > INT32_MAX)
      return invalid_argument(std::string("\"") + key + "\" must hold only integer token ids");
    out.push_back(e.get<int32_t>());
  }
  return Status();
}

Status parse_sampling(const json& j, SamplingParams& p) {
  FOLIO_RETURN_IF_ERROR(get_int(j, "n", p.n));
  FOLIO_RETURN_IF_ERROR(get_float(j, "temperature", p.temperature, &p.has_temperature));
  FOLIO_RETURN_IF_ERROR(get_float(j, "top_p", p.top_p, &p.has_top_p));
  FOLIO_RETURN_IF_ERROR(get_int(j, "top_k", p.top_k));
  p.has_top_k = j.contains("top_k") && !j["top_k"].is_null();
  FOLIO_RETURN_IF_ERROR(get_float(j, "min_p", p.min_p, &p.has_min_p));
  FOLIO_RETURN_IF_ERROR(
      get_float(j, "repetition_penalty", p.repetition_penalty, &p.has_repetition_penalty));
  FOLIO_RETURN_IF_ERROR(get_float(j, "presence_penalty", p.presence_penalty));
  FOLIO_RETURN_IF_ERROR(get_float(j, "frequency_penalty", p.frequency_penalty));
  FOLIO_RETURN_IF_ERROR(get_int(j, "max_tokens", p.max_tokens));
  FOLIO_RETURN_IF_ERROR(get_int(j, "min_tokens", p.min_tokens));
  FOLIO_RETURN_IF_ERROR(get_bool(j, "ignore_eos", p.ignore_eos));
  FOLIO_RETURN_IF_ERROR(get_bool(j, "include_stop_str_in_output", p.include_stop_str_in_output));
  FOLIO_RETURN_IF_ERROR(get_bool(j, "skip_special_tokens", p.skip_special_tokens));
  FOLIO_RETURN_IF_ERROR(get_bool(j, "use_beam_search", p.use_beam_search));
  FOLIO_RETURN_IF_ERROR(get_float(j, "length_penalty", p.length_penalty));
  FOLIO_RETURN_IF_ERROR(get_bool(j, "early_stopping", p.early_stopping));
  FOLIO_RETURN_IF_ERROR(get_opt_int(j, "logprobs", p.logprobs));
  FOLIO_RETURN_IF_ERROR(get_opt_int(j, "prompt_logprobs", p.prompt_logprobs));
  FOLIO_RETURN_IF_ERROR(get_ids(j, "stop_token_ids", p.stop_token_ids));
  if (auto it = j.find("seed"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer()) return invalid_argument("\"seed\" must be an integer");
    p.seed = static_cast<uint64_t>(it->get<int64_t>());
  }
  if (auto it = j.find("stop"); it != j.end() && !it->is_null()) {
    if (it->is_string()) {
      p.stop = {it->get<std::string>()};
    } else if (it->is_array()) {
      for (const auto& s : *it) {
        if (!s.is_string())
          return invalid_argument("\"stop\" must be a string or a list of strings");
        p.stop.push_back(s.get<std::string>());
      }
    } else {
      return invalid_argument("\"stop\" must be a string or a list of strings");
    }
  }
  if (auto it = j.find("logit_bias"); it != j.end() && !it->is_null()) {
    if (!it->is_object())
      return invalid_argument("\"logit_bias\" must be an object {token id: bias}");
    for (auto& [k, v] : it->items()) {
      char* end = nullptr;
      long id = std::strtol(k.c_str(), &end, 10);
      if (k.empty() || *end != '\0' || !v.is_number())
        return invalid_argument("\"logit_bias\" keys must be token ids and values numbers");
      p.logit_bias[static_cast<int32_t>(id)] = v.get<float>();
    }
  }
  return Status();
}

json logprob_entry(const PositionLogprobs& lp) {
  json e = json::object();
  for (const auto& t : lp.top) e[std::to_string(t.token_id)] = t.logprob;
  e[std::to_string(lp.token_id)] = lp.logprob;
  return e;
}

}  // namespace

Result<OfflineRequest> parse_offline_request(const std::string& line) {
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument("line is not valid JSON");
  if (!j.is_object()) return invalid_argument("line must be a JSON object");
  OfflineRequest r;
  FOLIO_RETURN_IF_ERROR(get_ids(j, "prompt_token_ids", r.prompt_token_ids));
  if (auto it = j.find("prompt"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return invalid_argument("\"prompt\" must be a string");
    r.prompt = it->get<std::string>();
  }
  if (r.prompt_token_ids.empty() && !r.prompt)
    return invalid_argument("needs a non-empty \"prompt_token_ids\" list or a \"prompt\" string");
  FOLIO_RETURN_IF_ERROR(parse_sampling(j, r.params));
  FOLIO_RETURN_IF_ERROR(get_int(j, "priority", r.priority));
  if (auto it = j.find("cache_salt"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return invalid_argument("\"cache_salt\" must be a string");
    r.cache_salt = it->get<std::string>();
  }
  return r;
}

json format_offline_output(int index, const std::vector<int32_t>& prompt_ids,
                           const std::optional<std::string>& prompt, const RequestOutput& out,
                           const SamplingParams& params, bool with_text) {
  json j = {{"index", index}, {"prompt_token_ids", prompt_ids}};
  if (prompt) j["prompt"] = *prompt;
  json outputs = json::array();
  for (const auto& d : out.deltas) {
    json o = {{"index", d.index},
              {"token_ids", d.token_ids},
              {"finish_reason", d.finish_reason ? json(*d.finish_reason) : json(nullptr)},
              {"cumulative_logprob", d.cumulative_logprob}};
    if (with_text) o["text"] = d.text;
    if (std::holds_alternative<int32_t>(d.stop_reason))
      o["stop_reason"] = std::get<int32_t>(d.stop_reason);
    else if (std::holds_alternative<std::string>(d.stop_reason))
      o["stop_reason"] = std::get<std::string>(d.stop_reason);
    else
      o["stop_reason"] = nullptr;
    if (params.logprobs) {
      json lps = json::array();
      for (const auto& lp : d.logprobs) lps.push_back(logprob_entry(lp));
      o["logprobs"] = lps;
    } else {
      o["logprobs"] = nullptr;
    }
    outputs.push_back(o);
  }
  j["outputs"] = outputs;
  if (params.prompt_logprobs) {
    json plp = json::array();
    for (const auto& p : out.prompt_logprobs) plp.push_back(p ? logprob_entry(*p) : json(nullptr));
    j["prompt_logprobs"] = plp;
  } else {
    j["prompt_logprobs"] = nullptr;
  }
  return j;
}

json format_offline_error(int index, const std::string& message) {
  return {{"index", index}, {"error", message}};
}

}  // namespace folio
