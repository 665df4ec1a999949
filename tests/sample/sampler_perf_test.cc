// Throughput of the host sampler on LLM-sized rows (128k vocabulary). The enabled test runs a
// small batch and only prints the time; the full 256-row batch is DISABLED_ (run it with
// --gtest_also_run_disabled_tests --gtest_filter='*Perf*').
#include <cstdio>
#include <ctime>

#include <gtest/gtest.h>

#include "sample/sampler.h"
#include "sample_test_util.h"

namespace folio {
namespace {

constexpr int kVocab = 128 * 1024;

struct Mode {
  const char* name;
  SamplingParams params;
};

std::vector<Mode> modes() {
  std::vector<Mode> out(6);
  out[0].name = "greedy";
  out[0].params.temperature = 0.0f;
  out[1].name = "plain T=1";
  out[2].name = "T=0.8 top_k=50";
  out[2].params.temperature = 0.8f;
  out[2].params.top_k = 50;
  out[3].name = "T=0.8 top_p=0.9";
  out[3].params.temperature = 0.8f;
  out[3].params.top_p = 0.9f;
  out[4].name = "T=0.7 top_k=40 top_p=0.95 min_p=0.05 rep=1.1 logprobs=5";
  out[4].params.temperature = 0.7f;
  out[4].params.top_k = 40;
  out[4].params.top_p = 0.95f;
  out[4].params.min_p = 0.05f;
  out[4].params.repetition_penalty = 1.1f;
  out[4].params.logprobs = 5;
  out[5].name = "T=1 min_p=0.1";
  out[5].params.min_p = 0.1f;
  return out;
}

double thread_cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

void run(int num_rows) {
  // One distinct row per batch slot would take 512 MiB at 256 rows; cycle 8 distinct rows.
  std::vector<float> logits;
  for (int r = 0; r < num_rows; ++r) {
    if (r < 8) {
      // LLM-like: most logits low, a few high.
      auto row = testing::random_logits(kVocab, 900 + static_cast<uint32_t>(r), 4.0f);
      for (size_t i = 0; i < row.size(); i += 997) row[i] += 12.0f;
      logits.insert(logits.end(), row.begin(), row.end());
    } else {
      logits.insert(logits.end(), logits.begin() + (r % 8) * kVocab,
                    logits.begin() + (r % 8 + 1) * kVocab);
    }
  }
  const std::vector<int32_t> prompt(512, 7), output(128, 9);
  Sampler sampler(SamplerConfig{kVocab, {2}});
  for (const Mode& m : modes()) {
    std::vector<SampleRow> rows;
    for (int r = 0; r < num_rows; ++r)
      rows.push_back({&m.params, prompt, output, RngStream::seeded(static_cast<uint64_t>(r), 0)});
    // Thread CPU time: the build machine is shared, wall time mostly measures the neighbours.
    const double t0 = thread_cpu_ms();
    const auto out = sampler.sample(logits, rows);
    const double ms = thread_cpu_ms() - t0;
    ASSERT_EQ(out.size(), static_cast<size_t>(num_rows));
    std::printf("[perf] %3d rows x %d vocab  %-58s %8.1f ms cpu (%.3f ms/row)\n", num_rows,
                kVocab, m.name, ms, ms / num_rows);
  }
}

TEST(SamplerPerf, SmallBatch) { run(4); }
TEST(SamplerPerf, DISABLED_Batch256) { run(256); }

}  // namespace
}  // namespace folio
