// Statistics of the benchmarks: numpy's linear percentiles, mean/std, and the serving report
// built from hand-made request records.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine_core.h"
#include "tools/bench_meta.h"
#include "tools/bench_serve_metrics.h"
#include "tools/bench_stats.h"

namespace folio::tools {
namespace {

TEST(BenchStats, PercentilesInterpolateLikeNumpy) {
  const std::vector<double> v = {4, 1, 3, 2};  // unsorted on purpose
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);   // np.percentile([1,2,3,4], 50)
  EXPECT_DOUBLE_EQ(percentile(v, 99), 3.97);  // rank 2.97
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4.0);
  EXPECT_DOUBLE_EQ(percentile(v, 25), 1.75);
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  EXPECT_NEAR(percentile(hundred, 99), 99.01, 1e-9);  // np.percentile(range(1, 101), 99)
  EXPECT_NEAR(percentile(hundred, 90), 90.1, 1e-9);
  EXPECT_DOUBLE_EQ(percentile(std::vector<double>{7.0}, 99), 7.0);
  EXPECT_DOUBLE_EQ(percentile(std::vector<double>{}, 50), 0.0);
}

// The host loop's figures per step: the step's wall time less the executor's, split into
// scheduling, inputs and (the rest) outputs.
TEST(BenchStats, HostLoopJsonSplitsTheHostLoopPerStep) {
  EngineCounters c;
  c.model_steps = 4;
  c.step_seconds = 0.100;
  c.execute_seconds = 0.080;
  c.schedule_seconds = 0.004;
  c.prepare_seconds = 0.006;
  const auto j = host_loop_json(c);
  EXPECT_EQ(j["model_steps"].get<int64_t>(), 4);
  EXPECT_NEAR(j["mean_step_ms"].get<double>(), 25.0, 1e-9);
  EXPECT_NEAR(j["mean_execute_ms"].get<double>(), 20.0, 1e-9);
  EXPECT_NEAR(j["mean_host_ms"].get<double>(), 5.0, 1e-9);
  EXPECT_NEAR(j["mean_schedule_ms"].get<double>(), 1.0, 1e-9);
  EXPECT_NEAR(j["mean_prepare_ms"].get<double>(), 1.5, 1e-9);
  EXPECT_NEAR(j["mean_outputs_ms"].get<double>(), 2.5, 1e-9);
  EXPECT_NEAR(j["host_share_of_execute"].get<double>(), 0.25, 1e-9);
}

TEST(BenchStats, MeanStdAndSummary) {
  const std::vector<double> v = {2, 4, 4, 4, 5, 5, 7, 9};
  EXPECT_DOUBLE_EQ(mean(v), 5.0);
  EXPECT_DOUBLE_EQ(stddev(v), 2.0);  // population std
  Summary s = summarize(v);
  EXPECT_EQ(s.count, 8);
  EXPECT_DOUBLE_EQ(s.min, 2.0);
  EXPECT_DOUBLE_EQ(s.max, 9.0);
  EXPECT_DOUBLE_EQ(s.median, 4.5);
  EXPECT_NEAR(s.p99, 8.86, 1e-12);  // rank 6.93: 7 + 0.93 * 2
  EXPECT_EQ(summarize(std::vector<double>{}).count, 0);
  nlohmann::json j;
  add_summary_json(j, "ttft_ms", s, 1000.0);
  EXPECT_DOUBLE_EQ(j["mean_ttft_ms"].get<double>(), 5000.0);
  EXPECT_DOUBLE_EQ(j["median_ttft_ms"].get<double>(), 4500.0);
  EXPECT_TRUE(j.contains("p99_ttft_ms") && j.contains("std_ttft_ms") && j.contains("p90_ttft_ms"));
}

RequestRecord record(int prompt, int tokens, double ttft, double e2e, std::vector<double> itl) {
  RequestRecord r;
  r.success = true;
  r.prompt_len = prompt;
  r.output_tokens = tokens;
  r.ttft_s = ttft;
  r.e2e_s = e2e;
  r.itl_s = std::move(itl);
  return r;
}

TEST(BenchServeMetrics, ReportFollowsVllmDefinitions) {
  std::vector<RequestRecord> rs;
  rs.push_back(record(10, 5, 0.1, 0.5, {0.1, 0.1, 0.1, 0.1}));  // tpot 0.1
  rs.push_back(record(20, 3, 0.2, 0.6, {0.3, 0.1}));            // tpot 0.2
  rs.push_back(record(30, 1, 0.3, 0.3, {}));                    // no tpot
  RequestRecord bad;
  bad.error = "HTTP 500: boom";
  bad.prompt_len = 99;
  rs.push_back(bad);
  EXPECT_DOUBLE_EQ(request_tpot(rs[0]), 0.1);
  EXPECT_LT(request_tpot(rs[2]), 0);
  nlohmann::json j = serve_metrics_json(rs, 2.0);
  EXPECT_EQ(j["completed"], 3);
  EXPECT_EQ(j["failed"], 1);
  EXPECT_EQ(j["total_input_tokens"], 60);  // failed requests do not count
  EXPECT_EQ(j["total_output_tokens"], 9);
  EXPECT_DOUBLE_EQ(j["request_throughput"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(j["output_throughput"].get<double>(), 4.5);
  EXPECT_DOUBLE_EQ(j["total_token_throughput"].get<double>(), 34.5);
  EXPECT_NEAR(j["mean_ttft_ms"].get<double>(), 200.0, 1e-9);
  EXPECT_NEAR(j["mean_tpot_ms"].get<double>(), 150.0, 1e-9);
  EXPECT_NEAR(j["median_itl_ms"].get<double>(), 100.0, 1e-9);  // {.1,.1,.1,.1,.1,.3}
  EXPECT_NEAR(j["mean_itl_ms"].get<double>(), 800.0 / 6, 1e-9);
  EXPECT_NEAR(j["mean_e2el_ms"].get<double>(), 1400.0 / 3, 1e-9);
  ASSERT_EQ(j["errors"].size(), 1u);
  EXPECT_EQ(j["errors"][0], "HTTP 500: boom");
}

}  // namespace
}  // namespace folio::tools
