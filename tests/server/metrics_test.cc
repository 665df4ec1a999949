// Metric primitives, the Prometheus text format and the folio: metric names.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "server/metrics.h"
#include "server/server_metrics.h"

namespace folio {
namespace {

// Checks the exposition format line by line: comments are HELP/TYPE, samples are
// `name{labels} value` with a parseable value. Returns name{labels} -> value.
std::map<std::string, double> parse_prometheus(const std::string& text) {
  std::map<std::string, double> out;
  static const std::regex kSample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})?) (\S+)$)");
  static const std::regex kComment(R"(^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$)");
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::smatch m;
    if (line[0] == '#') {
      EXPECT_TRUE(std::regex_match(line, kComment)) << line;
      continue;
    }
    EXPECT_TRUE(std::regex_match(line, m, kSample)) << line;
    if (m.size() < 4) continue;
    std::string v = m[3];
    out[m[1]] = v == "+Inf" ? INFINITY : std::stod(v);
  }
  return out;
}

TEST(Histogram, BucketsAreCumulativeAndInclusive) {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.1);  // upper bounds are inclusive (le)
  h.observe(0.5);
  h.observe(7.0);
  EXPECT_EQ(h.cumulative_counts(), (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ(h.count(), 4u);
  EXPECT_DOUBLE_EQ(h.sum(), 7.65);
}

TEST(MetricValue, Formatting) {
  EXPECT_EQ(format_metric_value(3), "3");
  EXPECT_EQ(format_metric_value(0.25), "0.25");
  EXPECT_EQ(format_metric_value(INFINITY), "+Inf");
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(ServerMetrics, RendersFolioMetricsInPrometheusFormat) {
  ServerMetrics m;
  m.record_request({"length", 0.5, 0.02, 0.01, 0.001});
  m.record_request({"stop", 1.5, 0.2, -1, -1});
  m.record_request({"stop", 2.5, -1, -1, -1});
  EngineStats s;
  s.num_running = 3;
  s.num_waiting = 2;
  s.kv_cache_usage = 0.5;
  s.prefix_cache_queries = 10;
  s.prefix_cache_hits = 4;
  s.num_preemptions = 1;
  s.prompt_tokens = 100;
  s.generation_tokens = 200;
  std::string text = m.render(s, "my\"model");
  auto v = parse_prometheus(text);
  const std::string l = "model_name=\"my\\\"model\"";
  EXPECT_EQ(v["folio:num_requests_running{" + l + "}"], 3);
  EXPECT_EQ(v["folio:num_requests_waiting{" + l + "}"], 2);
  EXPECT_EQ(v["folio:kv_cache_usage_perc{" + l + "}"], 0.5);
  EXPECT_EQ(v["folio:prefix_cache_queries_total{" + l + "}"], 10);
  EXPECT_EQ(v["folio:prefix_cache_hits_total{" + l + "}"], 4);
  EXPECT_EQ(v["folio:num_preemptions_total{" + l + "}"], 1);
  EXPECT_EQ(v["folio:prompt_tokens_total{" + l + "}"], 100);
  EXPECT_EQ(v["folio:generation_tokens_total{" + l + "}"], 200);
  EXPECT_EQ(v["folio:request_success_total{" + l + ",finished_reason=\"stop\"}"], 2);
  EXPECT_EQ(v["folio:request_success_total{" + l + ",finished_reason=\"length\"}"], 1);
  EXPECT_EQ(v["folio:e2e_request_latency_seconds_count{" + l + "}"], 3);
  EXPECT_EQ(v["folio:e2e_request_latency_seconds_sum{" + l + "}"], 4.5);
  EXPECT_EQ(v["folio:e2e_request_latency_seconds_bucket{" + l + ",le=\"1\"}"], 1);
  EXPECT_EQ(v["folio:e2e_request_latency_seconds_bucket{" + l + ",le=\"+Inf\"}"], 3);
  EXPECT_EQ(v["folio:time_to_first_token_seconds_count{" + l + "}"], 2);
  EXPECT_EQ(v["folio:time_per_output_token_seconds_count{" + l + "}"], 1);
  EXPECT_EQ(v["folio:request_queue_time_seconds_count{" + l + "}"], 1);
  EXPECT_NE(text.find("# TYPE folio:time_to_first_token_seconds histogram"), std::string::npos);
  EXPECT_NE(text.find("# TYPE folio:prompt_tokens counter"), std::string::npos);
  EXPECT_NE(text.find("# TYPE folio:kv_cache_usage_perc gauge"), std::string::npos);
  // Buckets, in the order written, never decrease and end at the count.
  std::istringstream in(text);
  std::string line;
  double prev = 0;
  int buckets = 0;
  while (std::getline(in, line)) {
    if (line.rfind("folio:e2e_request_latency_seconds_bucket", 0) != 0) continue;
    double val = std::stod(line.substr(line.rfind(' ') + 1));
    EXPECT_GE(val, prev) << line;
    prev = val;
    ++buckets;
  }
  EXPECT_EQ(buckets, 22);  // 21 bounds and +Inf
  EXPECT_EQ(prev, 3);
}

}  // namespace
}  // namespace folio
