// Logprobs: log-softmax of raw logits, top-K selection, and prompt logprobs.
//
// All logprobs here are of the **raw** logits (before penalties, bias or temperature), as vLLM's
// default `raw_logprobs`. The log-sum-exp is accumulated in double and each logprob rounded to
// float once. Order everywhere: higher value first, equal values by lower token id.
// Rank follows vLLM: the number of tokens whose logprob is >= the token's own (1 = the best).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace folio {

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

// The logprob record of one position: the chosen (or prompt) token and the top K.
struct TokenLogprobs {
  int32_t token_id = 0;
  float logprob = 0.0f;
  int32_t rank = 0;
  // The K best tokens, best first; the token itself is appended when not among them. Empty when
  // K == 0 (with K == 0 vLLM still reports the token itself; callers read token_id/logprob).
  std::vector<TokenLogprob> top;
};

// log(sum_i exp(row[i])) in double; -inf for an all -inf row. `row` must not be empty.
double log_sum_exp(std::span<const float> row);

// The ids of the k largest values, best first (ties: lower id; NaN entries skipped, so fewer
// than k when the row has fewer non-NaN values). O(V log k) worst case, no full sort.
std::vector<int32_t> top_k_ids(std::span<const float> row, int k);

// The record of `token_id` under the raw logits `row` [vocab], with the top `k` (k >= 0).
// `lse` is log_sum_exp(row) when the caller already has it (else pass std::nullopt).
TokenLogprobs make_token_logprobs(std::span<const float> row, int32_t token_id, int k,
                                  std::optional<double> lse = std::nullopt);

// Prompt logprobs over a chunk of prompt positions. `logits` is [num_rows, vocab] row-major; row r
// holds the logits computed at prompt position first_position + r, i.e. the distribution of the
// token at position q = first_position + r + 1. Returns one entry per position q < prompt.size()
// covered by the chunk, in order, preceded by std::nullopt for position 0 when first_position is 0
// (position 0 has no logprob). A whole prompt in one call (num_rows = prompt.size() or one less)
// gives exactly prompt.size() entries. `k` = params.prompt_logprobs.
std::vector<std::optional<TokenLogprobs>> prompt_logprobs(std::span<const float> logits, int vocab,
                                                          std::span<const int32_t> prompt, int k,
                                                          int first_position = 0);

}  // namespace folio
