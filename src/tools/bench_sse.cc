#include "tools/bench_sse.h"

#include <nlohmann/json.hpp>

namespace folio::tools {

Status SseParser::feed(std::string_view bytes, std::vector<std::string>& events) {
  for (char c : bytes) {
    if (c == '\n' && last_was_cr_) {
      last_was_cr_ = false;
      continue;
    }
    last_was_cr_ = c == '\r';
    if (c == '\n' || c == '\r') {
      end_line(events);
      continue;
    }
    if (line_.size() >= max_line_bytes_)
      return resource_exhausted("server-sent event line longer than " +
                                std::to_string(max_line_bytes_) + " bytes");
    line_.push_back(c);
  }
  return Status();
}

void SseParser::end_line(std::vector<std::string>& events) {
  const std::string_view line = line_;
  if (line.empty()) {  // a blank line dispatches the event
    if (has_data_) events.push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line.front() != ':') {  // ':' starts a comment
    const size_t colon = line.find(':');
    std::string_view value;
    if (colon != std::string_view::npos) {
      value = line.substr(colon + 1);
      if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    }
    if (line.substr(0, colon) == "data") {
      if (has_data_) data_.push_back('\n');
      data_.append(value);
      has_data_ = true;
    }
  }
  line_.clear();
}

CompletionEvent parse_completion_event(std::string_view data) {
  CompletionEvent ev;
  if (data == "[DONE]") {
    ev.done = true;
    return ev;
  }
  auto j = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    ev.error = "stream event is not a JSON object: " + std::string(data.substr(0, 200));
    return ev;
  }
  if (auto it = j.find("error"); it != j.end()) {
    const auto& e = *it;
    ev.error = e.is_object() && e.contains("message") && e["message"].is_string()
                   ? e["message"].get<std::string>()
                   : e.dump();
    return ev;
  }
  if (auto it = j.find("choices"); it != j.end() && it->is_array() && !it->empty()) {
    ev.has_choice = true;
    const auto& c = (*it)[0];
    if (c.is_object() && c.contains("text") && c["text"].is_string())
      ev.text = c["text"].get<std::string>();
  }
  if (auto it = j.find("usage"); it != j.end() && it->is_object()) {
    auto ct = it->find("completion_tokens");
    if (ct != it->end() && ct->is_number_integer()) ev.completion_tokens = ct->get<int>();
  }
  return ev;
}

}  // namespace folio::tools
