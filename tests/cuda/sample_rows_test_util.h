// Shared by the GPU sampler tests (sample_rows_test.cc, sample_rows_split_test.cc): logits rows
// with structure, and the logprob comparison both use against the host Sampler.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace folio::cuda::testing {

// kind 0: normal(0, 3); 1: normal(0, 1); 2: quantised to halves (many exact ties); 3: one NaN and
// one -inf; 4: the maximum tied at both ends of the row (the lower id must win).
inline std::vector<float> make_logits_row(int vocab, int kind, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, kind == 1 ? 1.f : 3.f);
  std::vector<float> row(static_cast<size_t>(vocab));
  for (float& x : row) x = nd(rng);
  if (kind == 2)
    for (float& x : row) x = std::round(x * 2.f) / 2.f;
  if (kind == 3) {
    row[static_cast<size_t>(rng() % vocab)] = std::numeric_limits<float>::quiet_NaN();
    row[static_cast<size_t>(rng() % vocab)] = -std::numeric_limits<float>::infinity();
  }
  if (kind == 4) {
    row.front() = 50.f;
    row.back() = 50.f;
  }
  return row;
}

// |a - b| within 1e-5 relative (absolute below 1); NaN only matches NaN (rows holding a NaN
// have a NaN log-sum-exp on both sides, as in sample/logprobs.cc).
inline void expect_logprob_near(float a, float b, const std::string& what) {
  if (std::isnan(b)) {
    EXPECT_TRUE(std::isnan(a)) << what;
    return;
  }
  EXPECT_NEAR(a, b, 1e-5f * std::max(1.f, std::fabs(b))) << what;
}

}  // namespace folio::cuda::testing
