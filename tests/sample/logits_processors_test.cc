// Logits processors change exactly the logits they should, by the formula they should, and leave
// every other entry bit-identical.
#include "sample/logits_processors.h"

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "sample_test_util.h"

namespace folio {
namespace {

using testing::random_logits;

constexpr int kVocab = 40;

void expect_only_changed(const std::vector<float>& before, const std::vector<float>& after,
                         const std::set<int32_t>& allowed) {
  for (int i = 0; i < kVocab; ++i) {
    if (!allowed.count(i)) {
      EXPECT_EQ(std::memcmp(&before[i], &after[i], sizeof(float)), 0) << i;
    }
  }
}

TEST(LogitsProcessors, PenaltiesFollowTheFormulas) {
  PenaltyWorkspace ws(kVocab);
  SamplingParams p;
  p.repetition_penalty = 1.25f;
  p.frequency_penalty = 0.3f;
  p.presence_penalty = -0.7f;
  const std::vector<int32_t> prompt = {1, 2, 2, 3, 30};
  const std::vector<int32_t> output = {3, 5, 5, 5, 7, 1};
  for (uint32_t seed = 0; seed < 10; ++seed) {
    const std::vector<float> before = random_logits(kVocab, seed);
    std::vector<float> row = before;
    apply_penalties(row, p, prompt, output, ws);

    std::map<int32_t, int> counts;
    for (int32_t t : output) ++counts[t];
    std::set<int32_t> touched(prompt.begin(), prompt.end());
    touched.insert(output.begin(), output.end());
    for (int32_t t : touched) {
      float want = before[t] > 0 ? before[t] / 1.25f : before[t] * 1.25f;  // once per token
      if (counts.count(t)) {
        want -= 0.3f * static_cast<float>(counts[t]);
        want -= -0.7f;
      }
      EXPECT_FLOAT_EQ(row[t], want) << "token " << t;
    }
    expect_only_changed(before, row, touched);
  }
}

TEST(LogitsProcessors, PresenceAndFrequencyIgnoreThePrompt) {
  PenaltyWorkspace ws(kVocab);
  SamplingParams p;
  p.frequency_penalty = 1.0f;
  p.presence_penalty = 1.0f;
  const std::vector<float> before = random_logits(kVocab, 4);
  std::vector<float> row = before;
  const std::vector<int32_t> prompt = {8, 9}, output = {10, 10};
  apply_penalties(row, p, prompt, output, ws);
  EXPECT_EQ(row[8], before[8]);
  EXPECT_EQ(row[9], before[9]);
  EXPECT_FLOAT_EQ(row[10], before[10] - 2.0f - 1.0f);
  expect_only_changed(before, row, {10});
  // The workspace forgets the previous row: a new row with no output is untouched.
  std::vector<float> again = before;
  apply_penalties(again, p, prompt, {}, ws);
  expect_only_changed(before, again, {});
}

TEST(LogitsProcessors, LogitBias) {
  SamplingParams p;
  p.logit_bias = {{0, 1.5f}, {39, -100.0f}, {12, 0.25f}};
  const std::vector<float> before = random_logits(kVocab, 5);
  std::vector<float> row = before;
  apply_logit_bias(row, p);
  EXPECT_EQ(row[0], before[0] + 1.5f);
  EXPECT_EQ(row[39], before[39] - 100.0f);
  EXPECT_EQ(row[12], before[12] + 0.25f);
  expect_only_changed(before, row, {0, 12, 39});
}

TEST(LogitsProcessors, MinTokensMasksEosAndStopIdsOnlyBelowMinTokens) {
  SamplingParams p;
  p.min_tokens = 3;
  p.stop_token_ids = {7, 21};
  const std::vector<int32_t> eos = {2, 33};
  const std::vector<float> before = random_logits(kVocab, 6);
  for (size_t n = 0; n < 3; ++n) {
    std::vector<float> row = before;
    apply_min_tokens(row, p, eos, n);
    for (int32_t t : {2, 33, 7, 21}) EXPECT_TRUE(std::isinf(row[t]) && row[t] < 0) << t;
    expect_only_changed(before, row, {2, 33, 7, 21});
  }
  for (size_t n : {3u, 4u, 100u}) {
    std::vector<float> row = before;
    apply_min_tokens(row, p, eos, n);
    expect_only_changed(before, row, {});
  }
  // ignore_eos does not lift the mask (vLLM masks all stop ids while below min_tokens).
  p.ignore_eos = true;
  std::vector<float> row = before;
  apply_min_tokens(row, p, eos, 0);
  EXPECT_TRUE(std::isinf(row[2]));
}

TEST(LogitsProcessors, OrderBiasThenMinTokensThenPenalties) {
  PenaltyWorkspace ws(kVocab);
  SamplingParams p;
  p.logit_bias = {{4, 2.0f}};
  p.repetition_penalty = 2.0f;
  p.min_tokens = 1;
  const std::vector<int32_t> eos = {6};
  std::vector<float> row(kVocab, 0.0f);
  row[4] = -1.0f;  // bias first makes it positive (1.0), then repetition divides: 0.5
  const std::vector<int32_t> prompt = {4};
  EXPECT_TRUE(apply_logits_processors(row, p, prompt, {}, eos, ws));
  EXPECT_FLOAT_EQ(row[4], 0.5f);
  EXPECT_TRUE(std::isinf(row[6]));
  EXPECT_FALSE(has_logits_processors(SamplingParams{}, 0));
}

}  // namespace
}  // namespace folio
