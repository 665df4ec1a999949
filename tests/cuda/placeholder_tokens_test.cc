// The GPU's placeholder resolution (backend/cuda/placeholder_tokens.h) against the host
// references: token ids (resolve_placeholders in backend/forward_batch.h), placeholders and real
// tokens mixed, more tokens than one block; penalty ops (resolve_placeholder_ops in
// backend/device_sampling.h).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/device_memory.h"
#include "backend/cuda/placeholder_tokens.h"
#include "backend/forward_batch.h"
#include "cuda_test_util.h"
#include "engine/device_sampling_plan.h"

namespace folio::cuda {
namespace {

TEST(PlaceholderTokens, ResolvedLikeTheHostReference) {
  FOLIO_REQUIRE_GPU();
  std::mt19937 rng(3);
  for (int n : {1, 7, 256, 1000}) {
    const int num_samples = 1 + n / 3;
    std::vector<SampleOut> samples(static_cast<size_t>(num_samples));
    std::vector<int32_t> sampled;
    for (auto& s : samples) {
      s = SampleOut{static_cast<int32_t>(rng() % 128000), 1, -0.5f, 0};
      sampled.push_back(s.token_id);
    }
    std::vector<int32_t> ids(static_cast<size_t>(n));
    int placeholders = 0;
    for (auto& id : ids) {
      if (placeholders == 0 || rng() % 2) {
        id = placeholder_token(static_cast<int>(rng() % num_samples));
        ++placeholders;
      } else {
        id = static_cast<int32_t>(rng() % 128000);
      }
    }
    ASSERT_GT(placeholders, 0);
    std::vector<int32_t> want = ids;
    ASSERT_TRUE(resolve_placeholders(want, sampled));
    auto d_ids = DeviceBuffer::allocate(ids.size() * 4);
    auto d_samples = DeviceBuffer::allocate(samples.size() * sizeof(SampleOut));
    ASSERT_TRUE(d_ids.ok() && d_samples.ok());
    FOLIO_ASSERT_OK(copy(d_ids->data(), ids.data(), ids.size() * 4));
    FOLIO_ASSERT_OK(copy(d_samples->data(), samples.data(), samples.size() * sizeof(SampleOut)));
    FOLIO_ASSERT_OK(resolve_placeholder_tokens(d_ids->as<int32_t>(), n,
                                               d_samples->as<SampleOut>(), num_samples, nullptr));
    std::vector<int32_t> got(ids.size());
    FOLIO_ASSERT_OK(copy(got.data(), d_ids->data(), got.size() * 4));
    EXPECT_EQ(got, want) << "n " << n;
  }
}

// Placeholder penalty ops: rows planned with a token in flight (often one the row already names),
// resolved by the kernel and by resolve_placeholder_ops, give the same ops bit for bit.
TEST(PlaceholderTokens, PenaltyOpsResolvedLikeTheHostReference) {
  FOLIO_REQUIRE_GPU();
  std::mt19937 rng(5);
  const int vocab = 1000, rows = 300;
  PenaltyWorkspace ws(vocab);
  DeviceSamplingBatch batch;
  std::vector<SampleOut> samples;
  std::vector<int32_t> sampled;
  std::vector<SamplingParams> params(rows);
  std::vector<std::vector<int32_t>> prompts(rows), outputs(rows);
  for (int i = 0; i < rows; ++i) {
    SamplingParams& p = params[static_cast<size_t>(i)];
    p.repetition_penalty = i % 3 ? 1.1f : 1.0f;
    p.frequency_penalty = i % 4 == 1 ? 0.0f : 0.35f;
    p.presence_penalty = i % 5 == 2 ? 0.0f : -0.2f;
    auto& prompt = prompts[static_cast<size_t>(i)];
    auto& out = outputs[static_cast<size_t>(i)];
    prompt.resize(static_cast<size_t>(1 + rng() % 700));  // several threads' worth of ops
    out.resize(static_cast<size_t>(rng() % 20));
    for (auto& t : prompt) t = static_cast<int32_t>(rng() % vocab);
    for (auto& t : out) t = static_cast<int32_t>(rng() % 60);
    const int32_t t = !out.empty() && rng() % 2 ? out[rng() % out.size()]
                                                : static_cast<int32_t>(rng() % vocab);
    samples.push_back(SampleOut{t, 1, -1.0f, 0});
    sampled.push_back(t);
    SampleRow sr;
    sr.params = &p;
    sr.prompt_token_ids = prompt;
    sr.output_token_ids = out;
    append_device_sample_row(sr, i, {}, ws, batch, placeholder_token(i));
  }
  DeviceSamplingBatch want = batch;
  ASSERT_TRUE(resolve_placeholder_ops(want, sampled));
  auto d_rows = DeviceBuffer::allocate(batch.rows.size() * sizeof(DeviceSampleRow));
  auto d_ops = DeviceBuffer::allocate(batch.ops.size() * sizeof(LogitOp));
  auto d_samples = DeviceBuffer::allocate(samples.size() * sizeof(SampleOut));
  ASSERT_TRUE(d_rows.ok() && d_ops.ok() && d_samples.ok());
  FOLIO_ASSERT_OK(copy(d_rows->data(), batch.rows.data(), batch.rows.size() * sizeof(DeviceSampleRow)));
  FOLIO_ASSERT_OK(copy(d_ops->data(), batch.ops.data(), batch.ops.size() * sizeof(LogitOp)));
  FOLIO_ASSERT_OK(copy(d_samples->data(), samples.data(), samples.size() * sizeof(SampleOut)));
  FOLIO_ASSERT_OK(resolve_placeholder_ops(d_rows->as<DeviceSampleRow>(), rows, d_ops->as<LogitOp>(),
                                          d_samples->as<SampleOut>(), rows, nullptr));
  std::vector<LogitOp> got(batch.ops.size());
  FOLIO_ASSERT_OK(copy(got.data(), d_ops->data(), got.size() * sizeof(LogitOp)));
  int none = 0, changed = 0;
  for (size_t q = 0; q < got.size(); ++q) {
    const LogitOp& g = got[q];
    const LogitOp& w = want.ops[q];
    ASSERT_TRUE(g.token == w.token && g.kind == w.kind && g.a == w.a && g.b == w.b) << "op " << q;
    none += g.kind == LogitOpKind::kNone;
    changed += std::memcmp(&g, &batch.ops[q], sizeof(LogitOp)) != 0;
  }
  EXPECT_GT(none, 50);      // tokens already named
  EXPECT_GT(changed, 300);  // every placeholder op, and the counts it raised
}

}  // namespace
}  // namespace folio::cuda
