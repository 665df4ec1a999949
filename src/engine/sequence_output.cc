#include "engine/sequence_output.h"

#include <algorithm>

namespace folio {

namespace {
PositionLogprobs to_position_logprobs(const TokenLogprobs& lp) {
  PositionLogprobs p;
  p.token_id = lp.token_id;
  p.logprob = lp.logprob;
  p.rank = lp.rank;
  for (const auto& t : lp.top) p.top.push_back({t.token_id, t.logprob});
  return p;
}
}  // namespace

SequenceOutput::SequenceOutput(int index, const Tokenizer* tokenizer, const SamplingParams& params,
                               const std::vector<int32_t>& eos_token_ids)
    : index_(index), params_(params), stop_(params, eos_token_ids) {
  if (tokenizer)
    detok_ = std::make_unique<IncrementalDetokenizer>(*tokenizer, params.skip_special_tokens);
}

// Order as vLLM (see sample/stop_checker.h): token stop conditions, then the token's text, then
// stop strings over the text, which override a token stop.
bool SequenceOutput::add_token(int32_t token, const TokenLogprobs& lp) {
  token_ids_.push_back(token);
  cumulative_logprob_ += lp.logprob;
  if (params_.logprobs) logprobs_.push_back(to_position_logprobs(lp));
  const size_t n = token_ids_.size();
  StopDecision by_token = stop_.check_token(token, n);
  if (detok_) {
    std::string piece = detok_->step(token);
    if (!by_token.drop_token_text) append_text(piece);
  }
  if (finished()) return true;  // a stop string matched
  if (by_token.finish_reason == FinishReason::kStop) {
    if (by_token.stop_token_id) stop_reason_ = *by_token.stop_token_id;
    if (by_token.drop_token_text) detok_.reset();
    finish("stop");
    return true;
  }
  return false;  // "length" is the scheduler's call (UpdateResult::finished_by_length)
}

void SequenceOutput::append_text(const std::string& piece) {
  if (piece.empty() || finished()) return;
  text_ += piece;
  StopDecision d = stop_.check_text(text_, piece.size(), token_ids_.size());
  if (!d.finished()) return;
  if (d.truncate_to != std::string::npos) text_.resize(d.truncate_to);
  if (d.stop_string) stop_reason_ = *d.stop_string;
  finish_reason_ = "stop";
  detok_.reset();  // nothing after a stop string is ever shown
}

void SequenceOutput::flush_detokenizer() {
  if (!detok_) return;
  std::string rest = detok_->finish();
  detok_.reset();
  append_text(rest);
}

void SequenceOutput::finish(const std::string& reason) {
  if (finished()) return;
  flush_detokenizer();
  if (!finished()) finish_reason_ = reason;  // the flushed text may have completed a stop string
}

size_t SequenceOutput::emit_limit() const {
  if (finished()) return text_.size();
  return std::max(emitted_text_, text_.size() - stop_.hold_back(text_));
}

CompletionDelta SequenceOutput::take_delta() {
  CompletionDelta d;
  d.index = index_;
  d.token_ids.assign(token_ids_.begin() + emitted_tokens_, token_ids_.end());
  if (params_.logprobs) d.logprobs.assign(logprobs_.begin() + emitted_tokens_, logprobs_.end());
  emitted_tokens_ = token_ids_.size();
  const size_t limit = emit_limit();
  d.text = text_.substr(emitted_text_, limit - emitted_text_);
  emitted_text_ = limit;
  d.cumulative_logprob = cumulative_logprob_;
  if (finished() && !emitted_finish_) {
    d.finish_reason = finish_reason_;
    d.stop_reason = stop_reason_;
    emitted_finish_ = true;
  }
  return d;
}

CompletionDelta SequenceOutput::full() {
  CompletionDelta d;
  d.index = index_;
  d.token_ids = token_ids_;
  d.logprobs = logprobs_;
  d.text = text_;
  d.cumulative_logprob = cumulative_logprob_;
  d.finish_reason = finish_reason_;
  d.stop_reason = stop_reason_;
  return d;
}

}  // namespace folio
