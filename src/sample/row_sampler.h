// RowSampler: picks one token from one row of processed, temperature-scaled logits.
//
// Contract (the CPU reference the GPU sampler must match):
//   m   = max_i row[i];  w_i = expf(row[i] - m)        (w of the best token is 1)
//   top-k (0 < k < vocab): keep tokens with row[i] >= the k-th largest value (ties kept, as vLLM
//       and HF do), so more than k tokens may survive on ties;
//   top-p (< 1): among the survivors, ordered by row value descending (ties: lower id first),
//       keep token j while the mass (sum of w, in double) of the tokens before it is
//       < top_p * sum(w over survivors); at least one is kept;
//   min-p (> 0): keep survivors with w_i >= min_p (i.e. p_i >= min_p * p_max);
//   draw: argmax over survivors of w_i / E_i, with E_i = RngStream::exponential(step, i)
//       (ties: lower id). This is an exact sample from w restricted to the survivors.
// greedy(): argmax of row, ties to the lowest id. NaN entries are never chosen.
// Cost: O(vocab) per row plus the Philox work for the survivors (a log only for the few tokens
// that could still win); top-p buckets the survivors by logit and sorts only the bucket where the
// nucleus ends, never the whole vocabulary.
// Owns vocab-sized scratch; one per thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sample/rng_stream.h"

namespace folio {

struct FilterParams {
  int top_k = -1;      // <= 0 or >= vocab: off
  float top_p = 1.0f;  // >= 1: off
  float min_p = 0.0f;  // <= 0: off
};

class RowSampler {
 public:
  explicit RowSampler(int vocab_size);

  static int32_t greedy(std::span<const float> row);
  // `row` holds the scaled logits [vocab]; `step` = the sequence's output length.
  int32_t sample(std::span<const float> row, const FilterParams& filters, const RngStream& rng,
                 uint32_t step);

  // The surviving token ids of the last sample() call when a filter was active, in no
  // particular order (exposed for tests; empty when no filter ran).
  std::span<const int32_t> last_candidates() const { return {ids_.data(), num_ids_}; }

 private:
  // Narrows ids_ to the survivors of each active filter; w_ holds w_i for every listed id.
  void filter_top_k(std::span<const float> row, int k);
  void filter_top_p(std::span<const float> row, float m, float top_p);
  void filter_min_p(float min_p);
  int32_t race_all(std::span<const float> row, float m, const RngStream& rng, uint32_t step) const;
  int32_t race_candidates(const RngStream& rng, uint32_t step);

  std::vector<int32_t> ids_;
  size_t num_ids_ = 0;
  std::vector<float> w_;        // [vocab], valid at the listed ids
  std::vector<float> scratch_;  // [vocab], for the top-k threshold
  std::vector<int32_t> scratch_ids_;
  std::vector<double> bucket_mass_;
};

}  // namespace folio
