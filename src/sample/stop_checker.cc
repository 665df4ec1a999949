#include "sample/stop_checker.h"

#include <algorithm>
#include <utility>

namespace folio {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kNone: break;
  }
  return "";
}

StopChecker::StopChecker(const SamplingParams& params, std::vector<int32_t> eos_token_ids)
    : stop_(params.stop),
      stop_token_ids_(params.stop_token_ids),
      min_tokens_(params.min_tokens),
      max_tokens_(params.max_tokens),
      include_stop_str_in_output_(params.include_stop_str_in_output) {
  if (!params.ignore_eos && !eos_token_ids.empty()) {
    eos_ = eos_token_ids.front();
    for (size_t i = 1; i < eos_token_ids.size(); ++i)
      if (eos_token_ids[i] != *eos_) stop_token_ids_.push_back(eos_token_ids[i]);
  }
}

StopDecision StopChecker::check_token(int32_t token_id, size_t num_output_tokens) const {
  StopDecision d;
  if (num_output_tokens < static_cast<size_t>(std::max(min_tokens_, 0))) return d;
  if (eos_ && token_id == *eos_) {
    d.finish_reason = FinishReason::kStop;
  } else if (std::find(stop_token_ids_.begin(), stop_token_ids_.end(), token_id) !=
             stop_token_ids_.end()) {
    d.finish_reason = FinishReason::kStop;
    d.stop_token_id = token_id;
  } else if (num_output_tokens >= static_cast<size_t>(max_tokens_)) {
    d.finish_reason = FinishReason::kLength;
  }
  d.drop_token_text = d.finish_reason == FinishReason::kStop && !include_stop_str_in_output_;
  return d;
}

StopDecision StopChecker::check_text(std::string_view text, size_t new_bytes,
                                     size_t num_output_tokens) const {
  StopDecision d;
  if (stop_.empty() || new_bytes == 0) return d;
  if (num_output_tokens <= static_cast<size_t>(std::max(min_tokens_, 0))) return d;
  new_bytes = std::min(new_bytes, text.size());
  // The earliest match that ends inside the new bytes (older text was checked before).
  size_t best_pos = std::string_view::npos;
  const std::string* best = nullptr;
  for (const std::string& s : stop_) {
    if (s.empty() || s.size() > text.size()) continue;
    const size_t old_end = text.size() - new_bytes;  // a match must end after this
    const size_t from = old_end + 1 > s.size() ? old_end + 1 - s.size() : 0;
    const size_t pos = text.find(s, from);
    if (pos != std::string_view::npos && pos < best_pos) {
      best_pos = pos;
      best = &s;
    }
  }
  if (best == nullptr) return d;
  d.finish_reason = FinishReason::kStop;
  d.stop_string = *best;
  const size_t cut = include_stop_str_in_output_ ? best_pos + best->size() : best_pos;
  if (cut < text.size()) d.truncate_to = cut;
  return d;
}

namespace {
// Bytes of an incomplete UTF-8 sequence at the end of `text` (0 when it ends on a boundary).
size_t incomplete_utf8_tail(std::string_view text) {
  const size_t n = text.size();
  for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
    const auto c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}
}  // namespace

size_t StopChecker::hold_back(std::string_view text) const {
  size_t hold = incomplete_utf8_tail(text);
  if (include_stop_str_in_output_) return hold;  // a stop string is shown anyway
  for (const std::string& s : stop_) {
    if (s.empty()) continue;
    // The longest proper prefix of s that `text` ends with.
    for (size_t k = std::min(s.size() - 1, text.size()); k > hold; --k) {
      if (text.substr(text.size() - k) == std::string_view(s).substr(0, k)) {
        hold = k;
        break;
      }
    }
  }
  return hold;
}

}  // namespace folio
