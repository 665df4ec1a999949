// Sampler behaviour: greedy argmax with lowest-id ties, raw logprobs against a float64
// log-softmax, top-K with the chosen token included, seed determinism independent of the batch,
// and prompt logprobs.
#include "sample/sampler.h"

#include <algorithm>
#include <numeric>

#include <gtest/gtest.h>

#include "sample_test_util.h"

namespace folio {
namespace {

using testing::log_softmax64;
using testing::random_logits;

TEST(Sampler, GreedyIsArgmaxWithLowestIdTies) {
  Sampler sampler(SamplerConfig{8, {}});
  SamplingParams p;
  p.temperature = 0.0f;
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 2.0f, 2.0f, 0.0f, 1.9f, -5.0f};
  EXPECT_EQ(sampler.sample_row(logits, {&p, {}, {}, {}}).token_id, 1);
  p.temperature = 5e-6f;  // below vLLM's epsilon: still greedy
  EXPECT_EQ(sampler.sample_row(logits, {&p, {}, {}, {}}).token_id, 1);
  // Greedy ignores top-k/top-p/min-p but sees penalties: a presence penalty on token 1 moves
  // the argmax to the next of the tied tokens.
  p.presence_penalty = 0.5f;
  const std::vector<int32_t> out = {1};
  EXPECT_EQ(sampler.sample_row(logits, {&p, {}, out, {}}).token_id, 3);
}

TEST(Sampler, GreedyMatchesArgmaxOnRandomRows) {
  constexpr int kVocab = 1000;
  Sampler sampler(SamplerConfig{kVocab, {}});
  SamplingParams p;
  p.temperature = 0.0f;
  for (uint32_t s = 0; s < 20; ++s) {
    const auto logits = random_logits(kVocab, s);
    const auto want = std::max_element(logits.begin(), logits.end()) - logits.begin();
    EXPECT_EQ(sampler.sample_row(logits, {&p, {}, {}, {}}).token_id, want);
  }
}

TEST(Sampler, LogprobsAreRawLogSoftmaxWithChosenInTopK) {
  constexpr int kVocab = 5000;
  Sampler sampler(SamplerConfig{kVocab, {}});
  SamplingParams p;
  p.temperature = 1.7f;  // processing must not leak into the reported logprobs
  p.repetition_penalty = 1.3f;
  p.logit_bias = {{17, 3.0f}};
  p.logprobs = 5;
  const std::vector<int32_t> prompt = {3, 4, 5}, out = {6, 6};
  for (uint32_t s = 0; s < 30; ++s) {
    const auto logits = random_logits(kVocab, 100 + s, 8.0f);
    const auto ref = log_softmax64(logits);
    const TokenLogprobs r = sampler.sample_row(logits, {&p, prompt, out, RngStream::seeded(s, 0)});
    EXPECT_NEAR(r.logprob, ref[r.token_id], 1e-5);
    // rank: how many tokens have a logprob >= the chosen one's
    const auto rank = std::count_if(ref.begin(), ref.end(), [&](double x) { return x >= ref[r.token_id]; });
    EXPECT_EQ(r.rank, rank);
    std::vector<int32_t> order(kVocab);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return ref[a] > ref[b]; });
    ASSERT_GE(r.top.size(), 5u);
    for (int j = 0; j < 5; ++j) {
      EXPECT_EQ(r.top[j].token_id, order[j]);
      EXPECT_NEAR(r.top[j].logprob, ref[order[j]], 1e-5);
    }
    const bool chosen_in_top5 = r.rank <= 5;
    EXPECT_EQ(r.top.size(), chosen_in_top5 ? 5u : 6u);
    const bool listed = std::any_of(r.top.begin(), r.top.end(),
                                    [&](const TokenLogprob& t) { return t.token_id == r.token_id; });
    EXPECT_TRUE(listed);
  }
}

TEST(Sampler, NoTopKWithoutLogprobs) {
  Sampler sampler(SamplerConfig{16, {}});
  SamplingParams p;
  const auto logits = random_logits(16, 1);
  EXPECT_TRUE(sampler.sample_row(logits, {&p, {}, {}, RngStream::seeded(1, 0)}).top.empty());
  p.logprobs = 0;
  EXPECT_TRUE(sampler.sample_row(logits, {&p, {}, {}, RngStream::seeded(1, 0)}).top.empty());
}

// A simulated decode loop over a batch: each row's next logits depend on its own tokens only.
std::vector<float> logits_for(const std::vector<int32_t>& tokens, int vocab) {
  uint32_t h = 2166136261u;
  for (int32_t t : tokens) h = (h ^ static_cast<uint32_t>(t)) * 16777619u;
  return random_logits(static_cast<size_t>(vocab), h, 3.0f);
}

struct Seq {
  SamplingParams params;
  RngStream rng;
  std::vector<int32_t> out;
};

void run_batch(std::vector<Seq*> batch, int vocab, int steps) {
  Sampler sampler(SamplerConfig{vocab, {}});
  const std::vector<int32_t> prompt = {1, 2, 3};
  for (int s = 0; s < steps; ++s) {
    std::vector<float> logits;
    std::vector<SampleRow> rows;
    for (Seq* q : batch) {
      const auto l = logits_for(q->out, vocab);
      logits.insert(logits.end(), l.begin(), l.end());
      rows.push_back({&q->params, prompt, q->out, q->rng});
    }
    const auto results = sampler.sample(logits, rows);
    for (size_t i = 0; i < batch.size(); ++i) batch[i]->out.push_back(results[i].token_id);
  }
}

TEST(Sampler, SeededOutputIndependentOfBatch) {
  constexpr int kVocab = 300, kSteps = 24;
  SamplingParams seeded;
  seeded.seed = 1234;
  seeded.temperature = 0.9f;
  seeded.top_p = 0.95f;
  Seq alone{seeded, RngStream::seeded(1234, 0), {}};
  run_batch({&alone}, kVocab, kSteps);

  // The same request at another batch position, among rows with other parameters, penalties,
  // filters, greedy decoding and other seeds.
  std::vector<Seq> others(4);
  others[0].params.temperature = 0.0f;
  others[1].params.top_k = 3;
  others[1].rng = RngStream::unseeded(77, "other-1", 0);
  others[2].params.repetition_penalty = 1.5f;
  others[2].params.min_p = 0.1f;
  others[2].rng = RngStream::seeded(1235, 0);
  others[3].params.temperature = 1.5f;
  others[3].rng = RngStream::seeded(1234, 1);  // same seed, another sequence of the request
  Seq again{seeded, RngStream::seeded(1234, 0), {}};
  run_batch({&others[0], &others[1], &others[2], &again, &others[3]}, kVocab, kSteps);
  EXPECT_EQ(alone.out, again.out);

  // Different seeds, and another sequence index under the same seed, give other outputs.
  Seq other_seed{seeded, RngStream::seeded(4321, 0), {}};
  Seq other_index{seeded, RngStream::seeded(1234, 1), {}};
  run_batch({&other_seed, &other_index}, kVocab, kSteps);
  EXPECT_NE(alone.out, other_seed.out);
  EXPECT_NE(alone.out, other_index.out);
}

TEST(Sampler, UnseededStreamsDependOnRequestIdAndEngineSeed) {
  constexpr int kVocab = 300, kSteps = 16;
  SamplingParams p;
  Seq a{p, RngStream::unseeded(5, "req-a", 0), {}};
  Seq a2{p, RngStream::unseeded(5, "req-a", 0), {}};
  Seq b{p, RngStream::unseeded(5, "req-b", 0), {}};
  Seq c{p, RngStream::unseeded(6, "req-a", 0), {}};
  run_batch({&a, &b}, kVocab, kSteps);
  run_batch({&c, &a2}, kVocab, kSteps);
  EXPECT_EQ(a.out, a2.out);
  EXPECT_NE(a.out, b.out);
  EXPECT_NE(a.out, c.out);
}

TEST(Sampler, MakeRngStreamPicksSeededOrDerived) {
  SamplingParams p;
  EXPECT_EQ(make_rng_stream(p, 5, "req", 1).key, RngStream::unseeded(5, "req", 1).key);
  EXPECT_EQ(make_rng_stream(p, 5, "req", 1).tag, RngStream::kUnseededTag);
  p.seed = 99;
  const RngStream s = make_rng_stream(p, 5, "req", 1);
  EXPECT_EQ(s.key, 99u);
  EXPECT_EQ(s.seq_index, 1u);
  EXPECT_EQ(s.tag, RngStream::kSeededTag);
}

TEST(PromptLogprobs, PositionsAndTopK) {
  constexpr int kVocab = 64;
  const std::vector<int32_t> prompt = {5, 9, 9, 40, 2};
  std::vector<float> logits;
  for (size_t p = 0; p < prompt.size(); ++p) {
    const auto row = random_logits(kVocab, 500 + static_cast<uint32_t>(p));
    logits.insert(logits.end(), row.begin(), row.end());
  }
  const auto out = prompt_logprobs(logits, kVocab, prompt, 3);
  ASSERT_EQ(out.size(), prompt.size());
  EXPECT_FALSE(out[0].has_value());
  for (size_t q = 1; q < prompt.size(); ++q) {
    ASSERT_TRUE(out[q].has_value());
    const std::vector<float> row(logits.begin() + (q - 1) * kVocab, logits.begin() + q * kVocab);
    const auto ref = log_softmax64(row);
    EXPECT_EQ(out[q]->token_id, prompt[q]);
    EXPECT_NEAR(out[q]->logprob, ref[prompt[q]], 1e-5);
    const auto best = std::max_element(ref.begin(), ref.end()) - ref.begin();
    EXPECT_EQ(out[q]->top[0].token_id, best);
    EXPECT_GE(out[q]->top.size(), 3u);
    EXPECT_LE(out[q]->top.size(), 4u);
  }
  // The same prompt in two chunks gives the same entries.
  const std::span<const float> all(logits);
  auto first = prompt_logprobs(all.subspan(0, 2 * kVocab), kVocab, prompt, 3, 0);
  auto second = prompt_logprobs(all.subspan(2 * kVocab), kVocab, prompt, 3, 2);
  ASSERT_EQ(first.size(), 3u);
  ASSERT_EQ(second.size(), 2u);
  first.insert(first.end(), second.begin(), second.end());
  for (size_t q = 1; q < prompt.size(); ++q) {
    EXPECT_EQ(first[q]->token_id, out[q]->token_id);
    EXPECT_EQ(first[q]->logprob, out[q]->logprob);
  }
}

}  // namespace
}  // namespace folio
