#include "sample/logits_processors.h"

#include <algorithm>
#include <limits>

#include "base/check.h"

namespace folio {

PenaltyWorkspace::PenaltyWorkspace(int vocab_size)
    : seen_(static_cast<size_t>(vocab_size), 0),
      out_stamp_(static_cast<size_t>(vocab_size), 0),
      counts_(static_cast<size_t>(vocab_size), 0) {
  FOLIO_CHECK(vocab_size > 0);
}

void PenaltyWorkspace::next_row() {
  output_distinct_.clear();
  if (++epoch_ == 0) {  // wrapped: stale stamps could alias the new epoch
    std::fill(seen_.begin(), seen_.end(), 0u);
    std::fill(out_stamp_.begin(), out_stamp_.end(), 0u);
    epoch_ = 1;
  }
}

bool PenaltyWorkspace::mark_seen(int32_t t) {
  FOLIO_CHECK(t >= 0 && t < vocab_size(), "token id outside the vocabulary");
  if (seen_[t] == epoch_) return false;
  seen_[t] = epoch_;
  return true;
}

int32_t PenaltyWorkspace::count_output(int32_t t) {
  FOLIO_CHECK(t >= 0 && t < vocab_size(), "token id outside the vocabulary");
  if (out_stamp_[t] != epoch_) {
    out_stamp_[t] = epoch_;
    counts_[t] = 0;
    output_distinct_.push_back(t);
  }
  return ++counts_[t];
}

void apply_logit_bias(std::span<float> row, const SamplingParams& params) {
  for (const auto& [t, bias] : params.logit_bias) {
    FOLIO_CHECK(t >= 0 && static_cast<size_t>(t) < row.size(), "logit_bias id outside vocab");
    row[t] += bias;
  }
}

void apply_min_tokens(std::span<float> row, const SamplingParams& params,
                      std::span<const int32_t> eos_token_ids, size_t num_output_tokens) {
  if (num_output_tokens >= static_cast<size_t>(std::max(params.min_tokens, 0))) return;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  auto mask = [&](int32_t t) {
    FOLIO_CHECK(t >= 0 && static_cast<size_t>(t) < row.size(), "stop id outside vocab");
    row[t] = kNegInf;
  };
  for (int32_t t : params.stop_token_ids) mask(t);
  for (int32_t t : eos_token_ids) mask(t);
}

void apply_penalties(std::span<float> row, const SamplingParams& params,
                     std::span<const int32_t> prompt, std::span<const int32_t> output,
                     PenaltyWorkspace& ws) {
  FOLIO_CHECK(static_cast<size_t>(ws.vocab_size()) == row.size());
  ws.next_row();
  const float rp = params.repetition_penalty;
  if (rp != 1.0f) {
    auto penalize = [&](int32_t t) {
      if (!ws.mark_seen(t)) return;
      const float x = row[t];
      row[t] = x > 0.0f ? x / rp : x * rp;
    };
    for (int32_t t : prompt) penalize(t);
    for (int32_t t : output) penalize(t);
  }
  const float fp = params.frequency_penalty, pp = params.presence_penalty;
  if (fp == 0.0f && pp == 0.0f) return;
  for (int32_t t : output) ws.count_output(t);
  for (int32_t t : ws.output_distinct()) {
    row[t] -= fp * static_cast<float>(ws.output_count(t));
    row[t] -= pp;
  }
}

bool has_logits_processors(const SamplingParams& params, size_t num_output_tokens) {
  return !params.logit_bias.empty() ||
         num_output_tokens < static_cast<size_t>(std::max(params.min_tokens, 0)) ||
         params.repetition_penalty != 1.0f || params.frequency_penalty != 0.0f ||
         params.presence_penalty != 0.0f;
}

bool apply_logits_processors(std::span<float> row, const SamplingParams& params,
                             std::span<const int32_t> prompt, std::span<const int32_t> output,
                             std::span<const int32_t> eos_token_ids, PenaltyWorkspace& ws) {
  if (!has_logits_processors(params, output.size())) return false;
  apply_logit_bias(row, params);
  apply_min_tokens(row, params, eos_token_ids, output.size());
  apply_penalties(row, params, prompt, output, ws);
  return true;
}

}  // namespace folio
