// Sampler: one token per row of a batch of logits, on the host (the CPU reference of the GPU
// sampler). Per row, in vLLM's order:
//   logits_processors (logit_bias, min_tokens, repetition, frequency/presence; see
//   logits_processors.h) -> greedy (temperature < 1e-5: argmax, ties to the lowest id) or
//   temperature scaling (row / T) -> top-k -> top-p -> min-p -> draw (see row_sampler.h and the
//   exact RNG contract in rng_stream.h).
// The reported logprobs are of the raw logits (vLLM's default raw_logprobs): the chosen token's
// logprob and rank always, plus the top params.logprobs tokens when requested, the chosen one
// included. The input logits are never modified.
// Threading: owns scratch buffers; one Sampler per thread (the engine thread).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/sampling_params.h"
#include "sample/logits_processors.h"
#include "sample/logprobs.h"
#include "sample/rng_stream.h"
#include "sample/row_sampler.h"

namespace folio {

// What the sampler needs to know about the sequence behind one row. Spans borrow.
struct SampleRow {
  const SamplingParams* params = nullptr;
  std::span<const int32_t> prompt_token_ids;
  std::span<const int32_t> output_token_ids;  // its size is the step of the RNG draw
  RngStream rng;
};

// The stream of sequence `seq_index` of a request: seeded when params.seed is set, else derived
// from the engine's seed and the request id (see rng_stream.h).
RngStream make_rng_stream(const SamplingParams& params, uint64_t engine_seed,
                          std::string_view request_id, uint32_t seq_index);

struct SamplerConfig {
  int vocab_size = 0;
  // The model's EOS ids (generation_config.json's eos_token_id, one or several), masked while a
  // request is below min_tokens.
  std::vector<int32_t> eos_token_ids;
};

class Sampler {
 public:
  // Temperatures below this are greedy (vLLM's _SAMPLING_EPS).
  static constexpr float kGreedyTemperature = 1e-5f;

  explicit Sampler(SamplerConfig config);

  // `logits` is [rows.size(), vocab_size] row-major fp32. Returns one record per row: token_id
  // (the chosen token), logprob, rank and, when params->logprobs is set, the top-K.
  std::vector<TokenLogprobs> sample(std::span<const float> logits, std::span<const SampleRow> rows);

  // One row; `logits_row` is [vocab_size].
  TokenLogprobs sample_row(std::span<const float> logits_row, const SampleRow& row);

  const SamplerConfig& config() const { return config_; }

 private:
  SamplerConfig config_;
  PenaltyWorkspace penalties_;
  RowSampler row_sampler_;
  std::vector<float> work_;  // [vocab]: the processed, scaled row
};

}  // namespace folio
