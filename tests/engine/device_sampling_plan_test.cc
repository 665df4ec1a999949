// The device sampler's plan (engine/device_sampling_plan.h) on the CPU: the sparse ops it builds,
// applied phase by phase with LogitOpKind's semantics (as the GPU kernel does), give exactly the
// row apply_logits_processors gives; the row fields carry the sampling parameters and the RNG
// stream; to_token_logprobs appends the chosen token when it is not among the top K.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "engine/device_sampling_plan.h"

namespace folio {
namespace {

// What apply_ops_kernel does to one row, sequentially (within a phase the ops commute).
void apply_ops(std::vector<float>& row, const DeviceSampleRow& r, const std::vector<LogitOp>& ops) {
  for (int j = r.op_begin; j < r.phase_end[3]; ++j) {
    const LogitOp& op = ops[static_cast<size_t>(j)];
    float& v = row[static_cast<size_t>(op.token)];
    switch (op.kind) {
      case LogitOpKind::kAdd: v += op.a; break;
      case LogitOpKind::kSet: v = op.a; break;
      case LogitOpKind::kRepetition: v = v > 0.0f ? v / op.a : v * op.a; break;
      case LogitOpKind::kSubTwo: v -= op.a; v -= op.b; break;
      case LogitOpKind::kNone: break;
    }
  }
}

TEST(DeviceSamplingPlan, OpsReproduceTheHostLogitsProcessorsBitForBit) {
  const int vocab = 300;
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.f, 4.f);
  const std::vector<int32_t> eos = {2, 7};
  PenaltyWorkspace ws(vocab), host_ws(vocab);
  DeviceSamplingBatch batch;
  int rows_with_ops = 0;
  for (int i = 0; i < 200; ++i) {
    SamplingParams p;
    p.repetition_penalty = i % 3 == 0 ? 1.0f + 0.1f * static_cast<float>(i % 5) : 1.0f;
    p.frequency_penalty = i % 4 == 1 ? 0.7f : 0.0f;
    p.presence_penalty = i % 5 == 2 ? -0.3f : 0.0f;
    if (i % 6 == 0) p.logit_bias = {{5, 2.5f}, {299, -1.0f}, {7, 4.0f}};
    if (i % 7 == 0) {
      p.min_tokens = 6;
      p.stop_token_ids = {9, 9, 2};
    }
    std::vector<int32_t> prompt(static_cast<size_t>(1 + i % 50)), output(static_cast<size_t>(i % 12));
    for (auto& t : prompt) t = static_cast<int32_t>(rng() % 40);  // repeats: distinct-token rules
    for (auto& t : output) t = static_cast<int32_t>(rng() % 40);
    std::vector<float> row(vocab);
    for (float& x : row) x = nd(rng);
    SampleRow sr;
    sr.params = &p;
    sr.prompt_token_ids = prompt;
    sr.output_token_ids = output;
    sr.rng = RngStream::seeded(1000 + i, 3);
    append_device_sample_row(sr, i, eos, ws, batch);
    const DeviceSampleRow& d = batch.rows.back();
    EXPECT_EQ(d.logits_row, i);
    EXPECT_EQ(d.rng_step, output.size());
    EXPECT_EQ(d.rng_seq_index, 3u);
    EXPECT_EQ(d.rng_tag, RngStream::kSeededTag);
    EXPECT_EQ((uint64_t{d.rng_key_hi} << 32) | d.rng_key_lo, static_cast<uint64_t>(1000 + i));
    EXPECT_LE(d.op_begin, d.phase_end[0]);
    for (int ph = 1; ph < 4; ++ph) EXPECT_LE(d.phase_end[ph - 1], d.phase_end[ph]);
    std::vector<float> want = row, got = row;
    const bool changed = apply_logits_processors(want, p, prompt, output, eos, host_ws);
    apply_ops(got, d, batch.ops);
    rows_with_ops += d.phase_end[3] > d.op_begin;
    if (!changed) {
      EXPECT_EQ(d.phase_end[3], d.op_begin) << "ops for a row nothing changes";
    }
    ASSERT_EQ(std::memcmp(got.data(), want.data(), sizeof(float) * vocab), 0) << "row " << i;
  }
  EXPECT_GT(rows_with_ops, 100);  // the comparison exercised the ops, not only empty plans
}

// Async steps: a row planned while its last output token is in flight (a placeholder) and then
// resolved (resolve_placeholder_ops, the device's reference) gives exactly the row planned with
// that token known: repeated and new tokens, every penalty, min_tokens at its boundary.
TEST(DeviceSamplingPlan, PlaceholderOpsResolveToTheOpsOfTheKnownToken) {
  const int vocab = 300;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 4.f);
  const std::vector<int32_t> eos = {2};
  PenaltyWorkspace ws(vocab), host_ws(vocab);
  DeviceSamplingBatch batch;
  std::vector<int32_t> previous;  // the step before's samples: row i's token in flight is [i]
  std::vector<std::vector<int32_t>> prompts, outputs;
  std::vector<SamplingParams> params(200);
  int named_before = 0, placeholder_ops = 0;
  for (int i = 0; i < 200; ++i) {
    SamplingParams& p = params[static_cast<size_t>(i)];
    p.repetition_penalty = i % 3 == 0 ? 1.2f : 1.0f;
    p.frequency_penalty = i % 4 == 1 ? 0.3f : (i % 4 == 2 ? 0.0f : 0.7f);
    p.presence_penalty = i % 5 == 2 ? -0.3f : (i % 5 == 3 ? 0.4f : 0.0f);
    if (i % 7 == 0) p.min_tokens = 1 + i % 5;
    prompts.emplace_back(static_cast<size_t>(1 + i % 30));
    outputs.emplace_back(static_cast<size_t>(i % 6));
    for (auto& t : prompts.back()) t = static_cast<int32_t>(rng() % 30);
    for (auto& t : outputs.back()) t = static_cast<int32_t>(rng() % 30);
    const auto& out = outputs.back();
    const int32_t in_flight = !out.empty() && rng() % 2 ? out[rng() % out.size()]  // named
                                                        : static_cast<int32_t>(rng() % 40);
    previous.push_back(in_flight);
    named_before += std::count(out.begin(), out.end(), in_flight) > 0;
    SampleRow sr;
    sr.params = &p;
    sr.prompt_token_ids = prompts.back();
    sr.output_token_ids = out;
    append_device_sample_row(sr, i, eos, ws, batch, -1 - i);
    EXPECT_EQ(batch.rows.back().rng_step, out.size() + 1);
  }
  for (const LogitOp& op : batch.ops) placeholder_ops += op.token < 0;
  ASSERT_TRUE(resolve_placeholder_ops(batch, previous));
  EXPECT_GT(placeholder_ops, 150);
  EXPECT_GT(named_before, 20);
  for (int i = 0; i < 200; ++i) {
    std::vector<int32_t> full = outputs[static_cast<size_t>(i)];
    full.push_back(previous[static_cast<size_t>(i)]);
    std::vector<float> row(vocab);
    for (float& x : row) x = nd(rng);
    std::vector<float> want = row, got = row;
    apply_logits_processors(want, params[static_cast<size_t>(i)], prompts[static_cast<size_t>(i)],
                            full, eos, host_ws);
    apply_ops(got, batch.rows[static_cast<size_t>(i)], batch.ops);
    ASSERT_EQ(std::memcmp(got.data(), want.data(), sizeof(float) * vocab), 0) << "row " << i;
  }
  std::vector<int32_t> too_few = {1};
  batch.ops.push_back({-5, LogitOpKind::kRepetition, 1.1f, 0.f});
  batch.rows.back().phase_end[2] = batch.rows.back().phase_end[3] = static_cast<int32_t>(batch.ops.size());
  EXPECT_FALSE(resolve_placeholder_ops(batch, too_few));
}

TEST(DeviceSamplingPlan, TokenLogprobsAppendTheChosenTokenOutsideTheTopK) {
  DeviceSample s{42, -3.5f, 7, {{1, -0.1f}, {2, -0.9f}}};
  TokenLogprobs t = to_token_logprobs(s, 2);
  EXPECT_EQ(t.token_id, 42);
  EXPECT_EQ(t.rank, 7);
  ASSERT_EQ(t.top.size(), 3u);
  EXPECT_EQ(t.top.back().token_id, 42);
  EXPECT_FLOAT_EQ(t.top.back().logprob, -3.5f);
  s.token_id = 2;
  EXPECT_EQ(to_token_logprobs(s, 2).top.size(), 2u);  // already there
  EXPECT_TRUE(to_token_logprobs(s, 0).top.empty());   // K = 0: the record only
  SamplingParams p;
  p.logprobs = kMaxDeviceLogprobs;
  EXPECT_TRUE(device_can_sample(p));
  p.logprobs = kMaxDeviceLogprobs + 1;
  EXPECT_FALSE(device_can_sample(p));
}

}  // namespace
}  // namespace folio
