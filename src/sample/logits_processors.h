// The logits processors that run before temperature, in vLLM's order, in place on one row:
//   1. logit_bias      row[t] += bias[t]
//   2. min_tokens      while num_output_tokens < min_tokens, row[t] = -inf for every t in
//                      stop_token_ids and the model's EOS ids (also with ignore_eos, as vLLM)
//   3. repetition      HF style, once per distinct token of prompt + output:
//                      row[t] > 0 ? row[t] / penalty : row[t] * penalty
//   4. frequency, presence (OpenAI), over output tokens only, with c = count of t in the output:
//                      row[t] -= frequency_penalty * c;  row[t] -= presence_penalty * (c > 0)
// Tokens not named by these rules are never touched. Token ids must lie in [0, vocab): they are
// validated at the API boundary (SamplingParams::validate), so a bad one here is a bug (CHECK).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/sampling_params.h"

namespace folio {

// Scratch that lets penalties run in O(prompt + output) per row, without clearing a vocab-sized
// array each time (epoch stamps). One per sampler; not thread-safe.
class PenaltyWorkspace {
 public:
  explicit PenaltyWorkspace(int vocab_size);
  int vocab_size() const { return static_cast<int>(seen_.size()); }

  // Starts a new row: forgets every mark of the previous one in O(1).
  void next_row();
  // Marks t; returns true the first time t is marked in this row.
  bool mark_seen(int32_t t);
  // Counts one more occurrence of t in the output; returns the new count.
  int32_t count_output(int32_t t);
  const std::vector<int32_t>& output_distinct() const { return output_distinct_; }
  int32_t output_count(int32_t t) const { return counts_[t]; }

 private:
  std::vector<uint32_t> seen_;        // == epoch_: marked by mark_seen in this row
  std::vector<uint32_t> out_stamp_;   // == epoch_: counts_ valid in this row
  std::vector<int32_t> counts_;
  std::vector<int32_t> output_distinct_;
  uint32_t epoch_ = 0;
};

void apply_logit_bias(std::span<float> row, const SamplingParams& params);
void apply_min_tokens(std::span<float> row, const SamplingParams& params,
                      std::span<const int32_t> eos_token_ids, size_t num_output_tokens);
void apply_penalties(std::span<float> row, const SamplingParams& params,
                     std::span<const int32_t> prompt, std::span<const int32_t> output,
                     PenaltyWorkspace& ws);

// All four, in order. Returns false when nothing could have changed (a cheap skip signal).
bool apply_logits_processors(std::span<float> row, const SamplingParams& params,
                             std::span<const int32_t> prompt, std::span<const int32_t> output,
                             std::span<const int32_t> eos_token_ids, PenaltyWorkspace& ws);

// True when any processor above would touch a row of this request at this output length.
bool has_logits_processors(const SamplingParams& params, size_t num_output_tokens);

}  // namespace folio
