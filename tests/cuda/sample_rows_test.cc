// The GPU sampler (backend/cuda/sample_rows.h) against the host Sampler on the same fp32 logits:
// the same token for every row (the draw contract is exact up to expf/logf ulps, which on
// random data never decide a race), the same rank and top-K ids, logprobs within 1e-5, and the
// raw logits unchanged afterwards (the logits-processor edits are undone).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backend/cuda/sample_rows.h"
#include "cuda_test_util.h"
#include "engine/device_sampling_plan.h"
#include "sample/sampler.h"
#include "sample_rows_test_util.h"

namespace folio::cuda {
namespace {

using testing::expect_logprob_near;
using testing::make_logits_row;
using testing::upload_raw;

struct Case {
  SamplingParams params;
  std::vector<int32_t> prompt, output;
  uint32_t seq_index = 0;
};

std::vector<Case> make_cases(int vocab, std::mt19937& rng) {
  std::vector<Case> cases;
  auto tokens = [&](int n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = static_cast<int32_t>(rng() % vocab);
    return t;
  };
  const float temps[] = {0.f, 1.f, 0.7f, 1.3f};
  const int top_ks[] = {-1, 1, 5, 50, vocab / 3};
  const float top_ps[] = {1.f, 0.9f, 0.5f, 0.05f};
  const float min_ps[] = {0.f, 0.05f, 0.3f};
  for (int i = 0; i < 96; ++i) {
    Case c;
    SamplingParams& p = c.params;
    p.temperature = temps[i % 4];
    p.top_k = top_ks[(i / 4) % 5];
    p.top_p = top_ps[(i / 3) % 4];
    p.min_p = min_ps[(i / 7) % 3];
    if (i % 5 == 0) p.repetition_penalty = 1.3f;
    if (i % 6 == 0) p.frequency_penalty = 0.4f;
    if (i % 7 == 0) p.presence_penalty = -0.5f;
    if (i % 8 == 0) p.logit_bias = {{3, 5.f}, {static_cast<int32_t>(vocab - 1), -100.f}};
    if (i % 9 == 0) {
      p.min_tokens = 4;
      p.stop_token_ids = {7, 7, 11};
    }
    if (i % 4 == 1) p.logprobs = (i % 3) * 10;
    if (i % 11 == 0) p.seed = 1234 + i;
    c.prompt = tokens(1 + i % 40);
    c.output = tokens(i % 13);
    c.seq_index = static_cast<uint32_t>(i % 3);
    cases.push_back(c);
  }
  return cases;
}

void run_against_host(int vocab) {
  FOLIO_REQUIRE_GPU();
  std::mt19937 rng(vocab);
  const std::vector<Case> cases = make_cases(vocab, rng);
  const int R = static_cast<int>(cases.size());
  std::vector<float> logits;
  for (int r = 0; r < R; ++r) {
    const auto row = make_logits_row(vocab, r % 4, rng);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  const std::vector<int32_t> eos = {2};
  Sampler host(SamplerConfig{vocab, eos});
  PenaltyWorkspace ws(vocab);
  DeviceSamplingBatch batch;
  std::vector<TokenLogprobs> want;
  for (int r = 0; r < R; ++r) {
    const Case& c = cases[static_cast<size_t>(r)];
    SampleRow row;
    row.params = &c.params;
    row.prompt_token_ids = c.prompt;
    row.output_token_ids = c.output;
    row.rng = make_rng_stream(c.params, 99, "req-" + std::to_string(r), c.seq_index);
    append_device_sample_row(row, r, eos, ws, batch);
    want.push_back(host.sample_row(
        std::span<const float>(logits.data() + static_cast<size_t>(r) * vocab, vocab), row));
  }
  DeviceBuffer d_logits = upload_raw(logits);
  DeviceBuffer d_rows = upload_raw(batch.rows);
  std::vector<LogitOp> ops = batch.ops;
  if (ops.empty()) ops.push_back({});
  DeviceBuffer d_ops = upload_raw(ops);
  DeviceBuffer d_saved = upload_raw(std::vector<float>(ops.size()));
  DeviceBuffer d_out = upload_raw(std::vector<SampleOut>(static_cast<size_t>(R), {-1, -1, NAN, -1}));
  DeviceBuffer d_top = upload_raw(std::vector<TopEntry>(static_cast<size_t>(R) * kMaxDeviceLogprobs));
  SampleRowsArgs a;
  a.logits = d_logits.as<float>();
  a.vocab = vocab;
  a.num_logits_rows = R;
  a.rows = d_rows.as<DeviceSampleRow>();
  a.num_rows = R;
  a.ops = d_ops.as<LogitOp>();
  a.op_saved = d_saved.as<float>();
  a.any_ops = !batch.ops.empty();
  a.out = d_out.as<SampleOut>();
  a.top = d_top.as<TopEntry>();
  FOLIO_ASSERT_OK(sample_rows(a, nullptr));
  FOLIO_ASSERT_OK(synchronize());
  std::vector<SampleOut> out(static_cast<size_t>(R));
  std::vector<TopEntry> top(static_cast<size_t>(R) * kMaxDeviceLogprobs);
  std::vector<float> after(logits.size());
  FOLIO_ASSERT_OK(copy(out.data(), d_out.data(), out.size() * sizeof(SampleOut)));
  FOLIO_ASSERT_OK(copy(top.data(), d_top.data(), top.size() * sizeof(TopEntry)));
  FOLIO_ASSERT_OK(copy(after.data(), d_logits.data(), after.size() * sizeof(float)));
  for (size_t i = 0; i < logits.size(); ++i)
    ASSERT_TRUE(after[i] == logits[i] || (std::isnan(after[i]) && std::isnan(logits[i])))
        << "logit " << i << " not restored";
  for (int r = 0; r < R; ++r) {
    const TokenLogprobs& w = want[static_cast<size_t>(r)];
    const SampleOut& o = out[static_cast<size_t>(r)];
    SCOPED_TRACE("row " + std::to_string(r) + " kind " + std::to_string(r % 4));
    ASSERT_EQ(o.token_id, w.token_id);
    EXPECT_EQ(o.rank, w.rank);
    expect_logprob_near(o.logprob, w.logprob, "chosen");
    DeviceSample d{o.token_id, o.logprob, o.rank, {}};
    for (int j = 0; j < o.num_top; ++j) {
      const TopEntry& t = top[static_cast<size_t>(r) * kMaxDeviceLogprobs + j];
      d.top.emplace_back(t.token_id, t.logprob);
    }
    const TokenLogprobs got =
        to_token_logprobs(d, cases[static_cast<size_t>(r)].params.logprobs.value_or(0));
    ASSERT_EQ(got.top.size(), w.top.size());
    for (size_t j = 0; j < w.top.size(); ++j) {
      EXPECT_EQ(got.top[j].token_id, w.top[j].token_id) << "top " << j;
      expect_logprob_near(got.top[j].logprob, w.top[j].logprob, "top " + std::to_string(j));
    }
  }
}

TEST(SampleRows, MatchesHostSamplerSmallVocab) { run_against_host(1000); }
TEST(SampleRows, MatchesHostSamplerOddVocab) { run_against_host(4099); }
TEST(SampleRows, MatchesHostSamplerLlama3Vocab) { run_against_host(128256); }

// Seeded draws follow the distribution: 4000 rows of the same 8-token softmax, each with its own
// stream, must give frequencies within 5 sigma of the probabilities.
TEST(SampleRows, DrawFrequenciesFollowSoftmax) {
  FOLIO_REQUIRE_GPU();
  const int vocab = 8, R = 4000;
  const std::vector<float> base = {1.f, 0.5f, 0.f, -1.f, 2.f, 0.2f, -3.f, 1.5f};
  std::vector<float> logits;
  DeviceSamplingBatch batch;
  PenaltyWorkspace ws(vocab);
  SamplingParams p;
  p.seed = 7;
  for (int r = 0; r < R; ++r) {
    logits.insert(logits.end(), base.begin(), base.end());
    SampleRow row;
    row.params = &p;
    row.rng = RngStream::seeded(7, static_cast<uint32_t>(r));
    append_device_sample_row(row, r, {}, ws, batch);
  }
  DeviceBuffer d_logits = upload_raw(logits), d_rows = upload_raw(batch.rows);
  DeviceBuffer d_out = upload_raw(std::vector<SampleOut>(R));
  DeviceBuffer d_top = upload_raw(std::vector<TopEntry>(static_cast<size_t>(R) * kMaxDeviceLogprobs));
  SampleRowsArgs a;
  a.logits = d_logits.as<float>();
  a.vocab = vocab;
  a.num_logits_rows = R;
  a.rows = d_rows.as<DeviceSampleRow>();
  a.num_rows = R;
  a.out = d_out.as<SampleOut>();
  a.top = d_top.as<TopEntry>();
  FOLIO_ASSERT_OK(sample_rows(a, nullptr));
  std::vector<SampleOut> out(R);
  FOLIO_ASSERT_OK(copy(out.data(), d_out.data(), out.size() * sizeof(SampleOut)));
  std::vector<int> counts(vocab, 0);
  for (const SampleOut& o : out) counts.at(static_cast<size_t>(o.token_id))++;
  double z = 0;
  for (float x : base) z += std::exp(x);
  for (int t = 0; t < vocab; ++t) {
    const double pr = std::exp(base[static_cast<size_t>(t)]) / z;
    const double sigma = std::sqrt(R * pr * (1 - pr));
    EXPECT_NEAR(counts[static_cast<size_t>(t)], R * pr, 5 * sigma + 1) << "token " << t;
  }
}

}  // namespace
}  // namespace folio::cuda
