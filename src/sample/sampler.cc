#include "sample/sampler.h"

#include <utility>

#include "base/check.h"

namespace folio {

RngStream make_rng_stream(const SamplingParams& params, uint64_t engine_seed,
                          std::string_view request_id, uint32_t seq_index) {
  if (params.seed) return RngStream::seeded(*params.seed, seq_index);
  return RngStream::unseeded(engine_seed, request_id, seq_index);
}

Sampler::Sampler(SamplerConfig config)
    : config_(std::move(config)),
      penalties_(config_.vocab_size),
      row_sampler_(config_.vocab_size),
      work_(static_cast<size_t>(config_.vocab_size)) {}

std::vector<TokenLogprobs> Sampler::sample(std::span<const float> logits,
                                           std::span<const SampleRow> rows) {
  const size_t vocab = static_cast<size_t>(config_.vocab_size);
  FOLIO_CHECK(logits.size() == rows.size() * vocab, "logits must be [num_rows, vocab]");
  std::vector<TokenLogprobs> out;
  out.reserve(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) out.push_back(sample_row(logits.subspan(r * vocab, vocab), rows[r]));
  return out;
}

TokenLogprobs Sampler::sample_row(std::span<const float> raw, const SampleRow& row) {
  FOLIO_CHECK(row.params != nullptr);
  FOLIO_CHECK(raw.size() == work_.size(), "logits row must be [vocab]");
  const SamplingParams& p = *row.params;
  const bool greedy = p.temperature < kGreedyTemperature;
  const bool process = has_logits_processors(p, row.output_token_ids.size());
  const bool scale = !greedy && p.temperature != 1.0f;

  // The row the choice is made on: the raw logits themselves when nothing changes them.
  std::span<const float> chosen_from = raw;
  if (process || scale) {
    std::copy(raw.begin(), raw.end(), work_.begin());
    std::span<float> work(work_);
    apply_logits_processors(work, p, row.prompt_token_ids, row.output_token_ids,
                            config_.eos_token_ids, penalties_);
    if (scale)
      for (float& x : work) x /= p.temperature;
    chosen_from = work;
  }

  int32_t token;
  if (greedy) {
    token = RowSampler::greedy(chosen_from);
  } else {
    const FilterParams filters{p.top_k, p.top_p, p.min_p};
    const uint32_t step = static_cast<uint32_t>(row.output_token_ids.size());
    token = row_sampler_.sample(chosen_from, filters, row.rng, step);
  }
  return make_token_logprobs(raw, token, p.logprobs.value_or(0));
}

}  // namespace folio
