// The split sampler (plain rows, up to 1024; sample_rows_split.cu) against the host Sampler:
// the same token, rank and logprob (within 1e-5) for greedy and temperature rows, over
// vocabularies that do and do not divide into 4-token groups, rows with exact ties, NaN and -inf;
// that the split kernels really ran (the partials in the scratch were written); and that a second
// launch on the same scratch gives the same results (each launch leaves its counters at zero).
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

void run_split(int vocab, int R, DeviceBuffer* shared_scratch = nullptr) {
  FOLIO_REQUIRE_GPU();
  std::mt19937 rng(static_cast<unsigned>(vocab * 31 + R));
  const float temps[] = {0.f, 1.f, 0.7f, 1.3f};
  std::vector<SamplingParams> params(static_cast<size_t>(R));
  std::vector<float> logits;
  for (int r = 0; r < R; ++r) {
    params[static_cast<size_t>(r)].temperature = temps[r % 4];
    if (r % 3 == 0) params[static_cast<size_t>(r)].seed = 77 + r;
    const auto row = make_logits_row(vocab, r % 5, rng);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  const std::vector<int32_t> eos = {2};
  Sampler host(SamplerConfig{vocab, eos});
  PenaltyWorkspace ws(vocab);
  DeviceSamplingBatch batch;
  std::vector<TokenLogprobs> want;
  const std::vector<int32_t> prompt = {5, 9, 11};
  for (int r = 0; r < R; ++r) {
    SampleRow row;
    row.params = &params[static_cast<size_t>(r)];
    row.prompt_token_ids = prompt;
    row.rng = make_rng_stream(*row.params, 5, "split-" + std::to_string(r), 0);
    append_device_sample_row(row, r, eos, ws, batch);
    ASSERT_TRUE(sample_split_eligible(batch.rows.back(), vocab)) << "row " << r;
    want.push_back(host.sample_row(
        std::span<const float>(logits.data() + static_cast<size_t>(r) * vocab, vocab), row));
  }
  DeviceBuffer d_logits = upload_raw(logits);
  DeviceBuffer d_rows = upload_raw(batch.rows);
  DeviceBuffer d_top = upload_raw(std::vector<TopEntry>(static_cast<size_t>(R) * kMaxDeviceLogprobs));
  DeviceBuffer own_scratch;
  if (!shared_scratch) own_scratch = upload_raw(std::vector<char>(kSampleSplitScratchBytes, 0));
  DeviceBuffer& d_scratch = shared_scratch ? *shared_scratch : own_scratch;
  SampleRowsArgs a;
  a.logits = d_logits.as<float>();
  a.vocab = vocab;
  a.num_logits_rows = R;
  a.rows = d_rows.as<DeviceSampleRow>();
  a.num_rows = R;
  a.top = d_top.as<TopEntry>();
  a.split_rows = true;
  a.scratch = d_scratch.data();
  a.scratch_bytes = kSampleSplitScratchBytes;
  for (int launch = 0; launch < 2; ++launch) {
    SCOPED_TRACE("launch " + std::to_string(launch));
    DeviceBuffer d_out = upload_raw(std::vector<SampleOut>(static_cast<size_t>(R), {-1, -1, NAN, -1}));
    a.out = d_out.as<SampleOut>();
    FOLIO_ASSERT_OK(sample_rows(a, nullptr));
    FOLIO_ASSERT_OK(synchronize());
    std::vector<SampleOut> out(static_cast<size_t>(R));
    FOLIO_ASSERT_OK(copy(out.data(), d_out.data(), out.size() * sizeof(SampleOut)));
    std::vector<char> scratch(kSampleSplitScratchBytes);
    FOLIO_ASSERT_OK(copy(scratch.data(), d_scratch.data(), scratch.size()));
    // Counters ([kSampleSplitMaxRows][2] unsigned) back at zero, partials behind them written.
    const size_t counters = 2 * sizeof(unsigned) * kSampleSplitMaxRows;
    for (size_t i = 0; i < counters; ++i) ASSERT_EQ(scratch[i], 0) << "counter byte " << i;
    bool written = false;
    for (size_t i = counters; i < counters + 256 && !written; ++i) written = scratch[i] != 0;
    EXPECT_TRUE(written) << "the split kernels did not run (FOLIO_SAMPLE_SPLIT=0?)";
    for (int r = 0; r < R; ++r) {
      const TokenLogprobs& w = want[static_cast<size_t>(r)];
      const SampleOut& o = out[static_cast<size_t>(r)];
      SCOPED_TRACE("row " + std::to_string(r) + " kind " + std::to_string(r % 5));
      ASSERT_EQ(o.token_id, w.token_id);
      EXPECT_EQ(o.rank, w.rank);
      EXPECT_EQ(o.num_top, 0);
      expect_logprob_near(o.logprob, w.logprob, "chosen");
    }
  }
}

TEST(SampleRowsSplit, OneRowLlama3Vocab) { run_split(128256, 1); }
TEST(SampleRowsSplit, FiveRowsLlama3Vocab) { run_split(128256, 5); }
TEST(SampleRowsSplit, ThirtyTwoRowsQwenVocab) { run_split(151936, 32); }
// A batch-256 decode step's sampling (B2): 8 chunks of at most 16k logits per row.
TEST(SampleRowsSplit, ManyRowsLlama3Vocab) { run_split(128256, 256); }
TEST(SampleRowsSplit, OddVocab) { run_split(4099, 7); }
TEST(SampleRowsSplit, SmallVocabOneChunk) { run_split(1000, 3); }

// One scratch through launches of different row counts, as the executor uses it (a layout that
// moved with the row count let a small launch overwrite a larger one's counters).
TEST(SampleRowsSplit, ScratchReusedAcrossRowCounts) {
  FOLIO_REQUIRE_GPU();
  DeviceBuffer scratch = upload_raw(std::vector<char>(kSampleSplitScratchBytes, 0));
  for (int R : {7, 1, 7, kSampleSplitMaxRows, 2, 9}) {
    SCOPED_TRACE("rows " + std::to_string(R));
    run_split(4099, R, &scratch);
  }
}

// Rows that are not plain take the per-row kernels: eligibility is exactly the contract's.
TEST(SampleRowsSplit, EligibilityFollowsTheFilters) {
  DeviceSampleRow r;
  EXPECT_TRUE(sample_split_eligible(r, 1000));
  r.top_k = 1000;  // >= vocab: off
  EXPECT_TRUE(sample_split_eligible(r, 1000));
  r.top_k = 50;
  EXPECT_FALSE(sample_split_eligible(r, 1000));
  r = DeviceSampleRow{};
  r.top_p = 0.9f;
  EXPECT_FALSE(sample_split_eligible(r, 1000));
  r = DeviceSampleRow{};
  r.min_p = 0.1f;
  EXPECT_FALSE(sample_split_eligible(r, 1000));
  r = DeviceSampleRow{};
  r.num_logprobs = 5;
  EXPECT_FALSE(sample_split_eligible(r, 1000));
  r = DeviceSampleRow{};
  r.phase_end[3] = 2;  // two logits ops
  EXPECT_FALSE(sample_split_eligible(r, 1000));
}

}  // namespace
}  // namespace folio::cuda
