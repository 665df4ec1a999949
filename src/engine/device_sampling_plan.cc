#include "engine/device_sampling_plan.h"

#include <algorithm>
#include <limits>

namespace folio {

bool device_can_sample(const SamplingParams& params) {
  return params.logprobs.value_or(0) <= kMaxDeviceLogprobs;
}

namespace {

// Ops of apply_logits_processors, phase by phase (see LogitOpKind).
void append_ops(const SampleRow& row, std::span<const int32_t> eos_token_ids, int32_t in_flight,
                PenaltyWorkspace& ws, DeviceSampleRow& d, std::vector<LogitOp>& ops) {
  const SamplingParams& p = *row.params;
  d.op_begin = static_cast<int32_t>(ops.size());
  const size_t num_output = row.output_token_ids.size() + (in_flight < 0 ? 1 : 0);
  const bool any = has_logits_processors(p, num_output);
  // 0: logit_bias (a map: distinct tokens).
  if (any)
    for (const auto& [t, bias] : p.logit_bias) ops.push_back({t, LogitOpKind::kAdd, bias, 0.f});
  d.phase_end[0] = static_cast<int32_t>(ops.size());
  // 1: min_tokens masks (setting -inf twice is idempotent).
  if (any && num_output < static_cast<size_t>(std::max(p.min_tokens, 0))) {
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    for (int32_t t : p.stop_token_ids) ops.push_back({t, LogitOpKind::kSet, kNegInf, 0.f});
    for (int32_t t : eos_token_ids) ops.push_back({t, LogitOpKind::kSet, kNegInf, 0.f});
  }
  d.phase_end[1] = static_cast<int32_t>(ops.size());
  // 2: repetition, once per distinct token of prompt + output.
  ws.next_row();
  if (any && p.repetition_penalty != 1.0f) {
    auto add = [&](int32_t t) {
      if (ws.mark_seen(t)) ops.push_back({t, LogitOpKind::kRepetition, p.repetition_penalty, 0.f});
    };
    for (int32_t t : row.prompt_token_ids) add(t);
    for (int32_t t : row.output_token_ids) add(t);
    if (in_flight < 0) ops.push_back({in_flight, LogitOpKind::kRepetition, p.repetition_penalty, 0.f});
  }
  d.phase_end[2] = static_cast<int32_t>(ops.size());
  // 3: frequency and presence, once per distinct output token: the CPU's two subtractions.
  if (any && (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f)) {
    for (int32_t t : row.output_token_ids) ws.count_output(t);
    for (int32_t t : ws.output_distinct())
      ops.push_back({t, LogitOpKind::kSubTwo,
                     p.frequency_penalty * static_cast<float>(ws.output_count(t)),
                     p.presence_penalty});
    if (in_flight < 0)
      ops.push_back({in_flight, LogitOpKind::kSubTwo, p.frequency_penalty, p.presence_penalty});
  }
  d.phase_end[3] = static_cast<int32_t>(ops.size());
}

}  // namespace

void append_device_sample_row(const SampleRow& row, int32_t logits_row,
                              std::span<const int32_t> eos_token_ids, PenaltyWorkspace& ws,
                              DeviceSamplingBatch& batch, int32_t in_flight) {
  const SamplingParams& p = *row.params;
  DeviceSampleRow d;
  d.logits_row = logits_row;
  d.temperature = p.temperature;
  d.top_k = p.top_k;
  d.top_p = p.top_p;
  d.min_p = p.min_p;
  d.rng_key_lo = static_cast<uint32_t>(row.rng.key);
  d.rng_key_hi = static_cast<uint32_t>(row.rng.key >> 32);
  d.rng_seq_index = row.rng.seq_index;
  d.rng_tag = row.rng.tag;
  d.rng_step = static_cast<uint32_t>(row.output_token_ids.size() + (in_flight < 0 ? 1 : 0));
  d.num_logprobs = std::max(0, p.logprobs.value_or(0));
  append_ops(row, eos_token_ids, in_flight, ws, d, batch.ops);
  batch.rows.push_back(d);
}

TokenLogprobs to_token_logprobs(const DeviceSample& s, int k) {
  TokenLogprobs out;
  out.token_id = s.token_id;
  out.logprob = s.logprob;
  out.rank = s.rank;
  if (k > 0) {
    bool has_token = false;
    for (const auto& [id, lp] : s.top) {
      out.top.push_back({id, lp});
      has_token |= id == s.token_id;
    }
    if (!has_token) out.top.push_back({s.token_id, s.logprob});
  }
  return out;
}

}  // namespace folio
