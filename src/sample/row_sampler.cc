#include "sample/row_sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"
#include "sample/logprobs.h"

namespace folio {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float row_max(std::span<const float> row) {
  float m = kNegInf;
  for (float x : row) m = x > m ? x : m;  // NaN never wins a comparison
  return m;
}
}  // namespace

RowSampler::RowSampler(int vocab_size)
    : ids_(static_cast<size_t>(vocab_size)),
      w_(static_cast<size_t>(vocab_size)),
      scratch_(static_cast<size_t>(vocab_size)) {
  FOLIO_CHECK(vocab_size > 0);
}

int32_t RowSampler::greedy(std::span<const float> row) {
  FOLIO_CHECK(!row.empty());
  int32_t best = 0;
  float best_v = kNegInf;
  bool found = false;
  for (size_t i = 0; i < row.size(); ++i) {
    if (row[i] > best_v || (!found && row[i] == best_v)) {  // strict >: lowest id on ties
      best_v = row[i];
      best = static_cast<int32_t>(i);
      found = true;
    }
  }
  return best;
}

int32_t RowSampler::sample(std::span<const float> row, const FilterParams& filters,
                           const RngStream& rng, uint32_t step) {
  const int vocab = static_cast<int>(row.size());
  FOLIO_CHECK(vocab == static_cast<int>(w_.size()), "row size differs from the vocabulary");
  num_ids_ = 0;
  const float m = row_max(row);
  if (!(m > kNegInf) || !std::isfinite(m)) return greedy(row);  // nothing to draw from
  const bool top_k_on = filters.top_k > 0 && filters.top_k < vocab;
  const bool top_p_on = filters.top_p < 1.0f;
  const bool min_p_on = filters.min_p > 0.0f;
  if (!top_k_on && !top_p_on && !min_p_on) return race_all(row, m, rng, step);

  if (top_k_on) {
    filter_top_k(row, filters.top_k);
    for (size_t j = 0; j < num_ids_; ++j) w_[ids_[j]] = std::exp(row[ids_[j]] - m);
  } else {
    // Every token with w > 0 (a w == 0 token can never win the race). When top-p is off, min-p
    // is a ratio filter that can run in this same pass.
    const float floor = top_p_on ? 0.0f : filters.min_p;
    for (int32_t i = 0; i < vocab; ++i) {
      const float w = std::exp(row[i] - m);
      if (w > 0.0f && w >= floor) {
        w_[i] = w;
        ids_[num_ids_++] = i;
      }
    }
  }
  if (top_p_on) filter_top_p(row, m, filters.top_p);
  if (min_p_on) filter_min_p(filters.min_p);
  return race_candidates(rng, step);
}

void RowSampler::filter_top_k(std::span<const float> row, int k) {
  float threshold;
  if (k <= 1024) {
    // A bounded heap scan: one comparison for most tokens once the heap holds good values.
    const std::vector<int32_t> best = top_k_ids(row, k);
    threshold = best.empty() ? kNegInf : row[best.back()];
  } else {
    // Selection on a NaN-free copy (O(vocab), no sort).
    for (size_t i = 0; i < row.size(); ++i) scratch_[i] = std::isnan(row[i]) ? kNegInf : row[i];
    std::nth_element(scratch_.begin(), scratch_.begin() + (k - 1), scratch_.end(),
                     std::greater<float>());
    threshold = scratch_[k - 1];
  }
  num_ids_ = 0;
  for (size_t i = 0; i < row.size(); ++i)
    if (row[i] >= threshold) ids_[num_ids_++] = static_cast<int32_t>(i);
}

void RowSampler::filter_top_p(std::span<const float> row, float m, float top_p) {
  const size_t n = num_ids_;
  double total = 0.0;
  for (size_t j = 0; j < n; ++j) total += w_[ids_[j]];
  const double target = static_cast<double>(top_p) * total;
  // Bucket the survivors by m - row[i] (monotone in the order), find the bucket where the
  // cumulative mass reaches the target, and sort only that bucket: every token of an earlier
  // bucket has less than `target` ranked before it, every token of a later one at least that.
  constexpr int kBuckets = 2048;
  constexpr float kRange = 24.0f;  // in logit units; w below e^-24 shares the last bucket
  constexpr float kScale = kBuckets / kRange;
  auto bucket_of = [&](int32_t id) {
    const float d = m - row[id];
    return d < kRange ? std::min(kBuckets - 1, static_cast<int>(d * kScale)) : kBuckets - 1;
  };
  bucket_mass_.assign(kBuckets, 0.0);
  for (size_t j = 0; j < n; ++j) bucket_mass_[bucket_of(ids_[j])] += w_[ids_[j]];
  int boundary = 0;
  double before = 0.0;  // mass of the buckets ahead of `boundary`
  for (; boundary < kBuckets - 1; ++boundary) {
    if (before + bucket_mass_[boundary] >= target) break;
    before += bucket_mass_[boundary];
  }
  // Keep the earlier buckets; move the boundary bucket's tokens to the end and sort them.
  size_t kept = 0;
  std::vector<int32_t>& tail = scratch_ids_;
  tail.clear();
  for (size_t j = 0; j < n; ++j) {
    const int b = bucket_of(ids_[j]);
    if (b < boundary) ids_[kept++] = ids_[j];
    else if (b == boundary) tail.push_back(ids_[j]);
  }
  std::sort(tail.begin(), tail.end(), [&](int32_t a, int32_t b) {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
  });
  for (int32_t id : tail) {
    if (kept > 0 && before >= target) break;
    before += w_[id];
    ids_[kept++] = id;
  }
  num_ids_ = kept;
}

void RowSampler::filter_min_p(float min_p) {
  size_t out = 0;
  for (size_t j = 0; j < num_ids_; ++j)
    if (w_[ids_[j]] >= min_p) ids_[out++] = ids_[j];
  num_ids_ = out;
}

int32_t RowSampler::race_all(std::span<const float> row, float m, const RngStream& rng,
                             uint32_t step) const {
  const uint32_t vocab = static_cast<uint32_t>(row.size());
  int32_t best = -1;
  float best_key = -1.0f;
  for (uint32_t base = 0; base < vocab; base += 4) {
    const PhiloxCounter bits = rng.bits4(step, base >> 2);
    const uint32_t lanes = std::min(4u, vocab - base);
    for (uint32_t lane = 0; lane < lanes; ++lane) {
      const float w = std::exp(row[base + lane] - m);
      if (!(w > 0.0f)) continue;
      const float u = uniform_open01(bits[lane]);
      // Shortcut with the same result: E = -ln(u) >= 1 - u, so when w <= best_key * (1 - u)
      // (with a margin far above logf's and the products' rounding) w / E cannot exceed
      // best_key and the log is skipped. Most tokens take this path once a good key is found.
      if (w <= best_key * ((1.0f - u) * 0.9999f)) continue;
      const float key = w / -std::log(u);
      if (key > best_key) {  // ascending ids + strict >: lowest id on ties
        best_key = key;
        best = static_cast<int32_t>(base + lane);
      }
    }
  }
  FOLIO_CHECK(best >= 0);
  return best;
}

int32_t RowSampler::race_candidates(const RngStream& rng, uint32_t step) {
  FOLIO_CHECK(num_ids_ > 0, "filters removed every token");
  // ids_ is ascending except for top-p's boundary bucket; consecutive ids of one group of four
  // share a Philox call.
  int32_t best = -1;
  float best_key = -1.0f;
  uint32_t group = UINT32_MAX;
  PhiloxCounter bits{};
  for (size_t j = 0; j < num_ids_; ++j) {
    const int32_t id = ids_[j];
    const float w = w_[id];
    if (!(w > 0.0f)) continue;
    if ((static_cast<uint32_t>(id) >> 2) != group) {
      group = static_cast<uint32_t>(id) >> 2;
      bits = rng.bits4(step, group);
    }
    const float u = uniform_open01(bits[id & 3]);
    if (w <= best_key * ((1.0f - u) * 0.9999f)) continue;  // see race_all
    const float key = w / -std::log(u);
    if (key > best_key || (key == best_key && id < best)) {
      best_key = key;
      best = id;
    }
  }
  FOLIO_CHECK(best >= 0);
  return best;
}

}  // namespace folio
