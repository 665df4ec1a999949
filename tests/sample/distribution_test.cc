// Statistical tests: over many draws at fixed logits, the sampler's frequencies match the
// distribution that temperature / top-k / top-p / min-p define (chi-square at p = 1e-4, with
// fixed seeds so the outcome is deterministic), and filtered or masked tokens never appear.
// The expected distributions are computed here independently, in float64 with full sorts.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include <gtest/gtest.h>

#include "sample/row_sampler.h"
#include "sample/sampler.h"
#include "sample_test_util.h"

namespace folio {
namespace {

using testing::chi2_critical_1e4;
using testing::chi2_statistic;
using testing::random_logits;

// The reference distribution, straight from the definitions.
std::vector<double> expected_probs(const std::vector<float>& logits, float t, int top_k,
                                   float top_p, float min_p) {
  const size_t n = logits.size();
  std::vector<double> s(n);
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<double>(logits[i] / t);
  std::vector<bool> keep(n, true);
  if (top_k > 0 && static_cast<size_t>(top_k) < n) {
    std::vector<double> sorted = s;
    std::sort(sorted.rbegin(), sorted.rend());
    for (size_t i = 0; i < n; ++i) keep[i] = s[i] >= sorted[top_k - 1];
  }
  auto normalize = [&]() {
    double m = -INFINITY, z = 0.0;
    for (size_t i = 0; i < n; ++i) if (keep[i]) m = std::max(m, s[i]);
    std::vector<double> p(n, 0.0);
    for (size_t i = 0; i < n; ++i) if (keep[i]) z += (p[i] = std::exp(s[i] - m));
    for (double& x : p) x /= z;
    return p;
  };
  std::vector<double> p = normalize();
  if (top_p < 1.0f) {
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
    double before = 0.0;
    for (size_t j = 0; j < n; ++j) {
      const size_t i = order[j];
      if (!keep[i]) continue;
      if (j > 0 && before >= top_p) keep[i] = false;
      before += p[i];
    }
    p = normalize();
  }
  if (min_p > 0.0f) {
    const double pmax = *std::max_element(p.begin(), p.end());
    for (size_t i = 0; i < n; ++i) keep[i] = keep[i] && p[i] >= min_p * pmax;
    p = normalize();
  }
  return p;
}

struct Case {
  const char* name;
  float temperature;
  int top_k;
  float top_p;
  float min_p;
};

class DistributionTest : public ::testing::TestWithParam<Case> {};

// Draws through the whole Sampler (temperature scaling included), one stream per draw.
TEST_P(DistributionTest, MatchesReference) {
  const Case c = GetParam();
  constexpr int kVocab = 19;  // not a multiple of 4: exercises the last Philox group
  constexpr int kDraws = 40000;
  const std::vector<float> logits = random_logits(kVocab, 11, 2.0f);
  const std::vector<double> p = expected_probs(logits, c.temperature, c.top_k, c.top_p, c.min_p);

  Sampler sampler(SamplerConfig{kVocab, {}});
  SamplingParams params;
  params.temperature = c.temperature;
  params.top_k = c.top_k;
  params.top_p = c.top_p;
  params.min_p = c.min_p;
  std::vector<int> counts(kVocab, 0);
  for (int d = 0; d < kDraws; ++d) {
    SampleRow row{&params, {}, {}, RngStream::seeded(2024, static_cast<uint32_t>(d))};
    ++counts[sampler.sample_row(logits, row).token_id];
  }
  for (int i = 0; i < kVocab; ++i) {
    if (p[i] == 0.0) {
      EXPECT_EQ(counts[i], 0) << "filtered token " << i << " was drawn";
    }
  }
  int df = 0;
  const double stat = chi2_statistic(counts, p, kDraws, &df);
  if (df == 0) return;  // one survivor: the zero-count check above is the whole test
  EXPECT_LT(stat, chi2_critical_1e4(df)) << c.name << " df=" << df;
}

INSTANTIATE_TEST_SUITE_P(
    Filters, DistributionTest,
    ::testing::Values(Case{"plain", 1.0f, -1, 1.0f, 0.0f}, Case{"cold", 0.5f, -1, 1.0f, 0.0f},
                      Case{"hot", 2.0f, -1, 1.0f, 0.0f}, Case{"top_k", 1.0f, 5, 1.0f, 0.0f},
                      Case{"top_p", 1.0f, -1, 0.7f, 0.0f}, Case{"min_p", 1.0f, -1, 1.0f, 0.2f},
                      Case{"all", 0.7f, 10, 0.8f, 0.05f}, Case{"top_k_1", 1.3f, 1, 1.0f, 0.0f}),
    [](const auto& info) { return std::string(info.param.name); });

// The chi-square test can fail: a sampler that ignored temperature would be rejected.
TEST(Distribution, ChiSquareRejectsAWrongTemperature) {
  constexpr int kVocab = 19, kDraws = 40000;
  const std::vector<float> logits = random_logits(kVocab, 11, 2.0f);
  RowSampler rs(kVocab);
  std::vector<int> counts(kVocab, 0);
  const RngStream rng = RngStream::seeded(5, 0);
  for (int d = 0; d < kDraws; ++d) ++counts[rs.sample(logits, {}, rng, static_cast<uint32_t>(d))];
  int df = 0;
  const double wrong = chi2_statistic(counts, expected_probs(logits, 0.8f, -1, 1.0f, 0.0f), kDraws, &df);
  EXPECT_GT(wrong, chi2_critical_1e4(df));
  const double right = chi2_statistic(counts, expected_probs(logits, 1.0f, -1, 1.0f, 0.0f), kDraws, &df);
  EXPECT_LT(right, chi2_critical_1e4(df));
}

// min_tokens masks EOS and stop ids: they are never drawn, even when they dominate.
TEST(Distribution, MaskedTokensAreNeverDrawn) {
  constexpr int kVocab = 12;
  std::vector<float> logits = random_logits(kVocab, 3, 1.0f);
  logits[2] = 8.0f;  // EOS, overwhelmingly likely unless masked
  logits[7] = 8.0f;  // a stop token id
  Sampler sampler(SamplerConfig{kVocab, {2}});
  SamplingParams params;
  params.min_tokens = 4;
  params.stop_token_ids = {7};
  const std::vector<int32_t> three = {1, 1, 1}, four = {1, 1, 1, 1};
  int hits_after = 0;
  for (uint32_t d = 0; d < 3000; ++d) {
    const int32_t t = sampler.sample_row(logits, {&params, {}, three, RngStream::seeded(9, d)}).token_id;
    EXPECT_NE(t, 2);
    EXPECT_NE(t, 7);
    const int32_t u = sampler.sample_row(logits, {&params, {}, four, RngStream::seeded(9, d)}).token_id;
    hits_after += (u == 2 || u == 7);
  }
  EXPECT_GT(hits_after, 2900);  // once min_tokens is reached they dominate again
}

// Top-p over a large vocabulary takes the chunked partial-sort path: its survivors must be
// exactly the reference nucleus.
TEST(Distribution, TopPLargeVocabKeepsExactlyTheNucleus) {
  constexpr int kVocab = 50000;
  const std::vector<float> logits = random_logits(kVocab, 77, 6.0f);
  for (float top_p : {0.05f, 0.5f, 0.9f, 0.999f}) {
    RowSampler rs(kVocab);
    rs.sample(logits, FilterParams{-1, top_p, 0.0f}, RngStream::seeded(1, 0), 0);
    const auto got = rs.last_candidates();
    const std::set<int32_t> got_set(got.begin(), got.end());
    const auto p = expected_probs(logits, 1.0f, -1, top_p, 0.0f);
    std::set<int32_t> want;
    for (int i = 0; i < kVocab; ++i) if (p[i] > 0.0) want.insert(i);
    // float vs double mass may disagree only on a token right at the boundary
    const auto diff = static_cast<long>(got_set.size()) - static_cast<long>(want.size());
    EXPECT_LE(std::abs(diff), 1) << top_p;
    size_t common = 0;
    for (int32_t id : got_set) common += want.count(id);
    EXPECT_GE(common + 1, std::max(got_set.size(), want.size())) << top_p;
  }
}

// Top-k keeps ties at the k-th value (vLLM/HF semantics).
TEST(Distribution, TopKKeepsTies) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 2.0f, 0.5f, 2.0f};
  RowSampler rs(6);
  rs.sample(logits, FilterParams{2, 1.0f, 0.0f}, RngStream::seeded(1, 0), 0);
  const auto got = rs.last_candidates();
  EXPECT_EQ(std::set<int32_t>(got.begin(), got.end()), (std::set<int32_t>{1, 2, 3, 5}));
}

}  // namespace
}  // namespace folio
