// Metric primitives, the Prometheus text format and the folio: metric names.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "engine/async_engine.h"
#include "engine/engine_factory.h"
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

// Every folio:cache_config_info sample line of `text` (the gauge must have exactly one).
std::vector<std::string> cache_info_samples(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("folio:cache_config_info", 0) == 0) out.push_back(line);
  return out;
}

std::string cache_info_line(const std::string& model_label, int block_size, const char* dtype,
                            const char* mode, int gpu_blocks, int cpu_blocks, bool prefix) {
  return "folio:cache_config_info{model_name=\"" + model_label + "\",block_size=\"" +
         std::to_string(block_size) + "\",cache_dtype=\"" + dtype + "\",kv_cache_mode=\"" + mode +
         "\",num_gpu_blocks=\"" + std::to_string(gpu_blocks) + "\",num_cpu_blocks=\"" +
         std::to_string(cpu_blocks) + "\",enable_prefix_caching=\"" + (prefix ? "True" : "False") +
         "\"} 1";
}

TEST(ServerMetrics, CacheConfigInfoIsOneGaugeSampleWithEscapedLabels) {
  ServerMetrics m;
  EngineStats s;
  s.cache_config.block_size = 1;
  s.cache_config.cache_dtype = "fp8_e4m3";
  s.cache_config.kv_cache_mode = "token";
  s.cache_config.num_gpu_blocks = 4096;
  s.cache_config.num_cpu_blocks = 512;
  s.cache_config.enable_prefix_caching = false;
  const std::string text = m.render(s, "my\"model");
  EXPECT_EQ(cache_info_samples(text),
            std::vector<std::string>{cache_info_line("my\\\"model", 1, "fp8_e4m3", "token", 4096,
                                                     512, false)});
  EXPECT_NE(text.find("# TYPE folio:cache_config_info gauge\n"), std::string::npos);
  auto v = parse_prometheus(text);  // also checks the format of every line
  EXPECT_EQ(v.count("folio:kv_cache_usage_perc{model_name=\"my\\\"model\"}"), 1u);
}

// The gauge of a real engine (AsyncEngine over EngineCore on the CPU reference), default config
// and fp8 / token-mode / swap variants: the labels are what the engine was built with.
struct CacheInfoCase {
  EngineConfig config;
  int block_size;
  const char* dtype;
  const char* mode;
  bool prefix;
};

void expect_engine_cache_info(const CacheInfoCase& c) {
  const std::string dir = std::string(FOLIO_TEST_DATA_DIR) + "/models/llama_gqa";
  auto model = ModelConfig::load(dir);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const KvCacheShape planned = plan_kv_cache(c.config, *model);  // what the CPU executor gets
  LoadOptions o;
  o.model_dir = dir;
  o.device = "cpu";
  auto core = load_engine(o, c.config);
  ASSERT_TRUE(core.ok()) << core.status().to_string();
  AsyncEngine engine(std::move(*core), "m", std::nullopt);
  ServerMetrics m;
  const std::string text = m.render(engine.stats(), "m");
  EXPECT_EQ(cache_info_samples(text),
            std::vector<std::string>{cache_info_line("m", c.block_size, c.dtype, c.mode,
                                                     planned.num_blocks, planned.num_swap_blocks,
                                                     c.prefix)})
      << text;
  engine.shutdown();
}

TEST(ServerMetrics, CacheConfigInfoOfADefaultEngine) {
  EngineConfig c;
  ASSERT_EQ(c.block_size, 16);
  expect_engine_cache_info({c, 16, "auto", "paged", true});
}

TEST(ServerMetrics, CacheConfigInfoOfAnFp8EngineWithSwap) {
  EngineConfig c;
  c.block_size = 8;
  c.num_kv_blocks = 64;
  c.swap_space_gib = 0.01;
  c.kv_cache_dtype = KvCacheDtype::kFp8E4m3;
  c.enable_prefix_caching = false;
  auto model = ModelConfig::load(std::string(FOLIO_TEST_DATA_DIR) + "/models/llama_gqa");
  ASSERT_TRUE(model.ok());
  ASSERT_GT(plan_kv_cache(c, *model).num_swap_blocks, 0);  // a non-zero num_cpu_blocks label
  expect_engine_cache_info({c, 8, "fp8_e4m3", "paged", false});
}

TEST(ServerMetrics, CacheConfigInfoOfATokenModeEngine) {
  EngineConfig c;
  c.kv_mode = KvCacheMode::kToken;
  c.max_total_tokens = 300;
  expect_engine_cache_info({c, 1, "auto", "token", true});
}

}  // namespace
}  // namespace folio
