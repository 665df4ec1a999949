// Reading the served engine's prefix-cache counters from Prometheus text, and when a run's hits
// deserve a warning.
#include "tools/bench_prefix_cache.h"

#include <gtest/gtest.h>

namespace folio::tools {
namespace {

constexpr const char* kFolioMetrics = R"(# HELP folio:prefix_cache_queries Prefix cache queries.
# TYPE folio:prefix_cache_queries counter
folio:prefix_cache_queries_total{model_name="tiny"} 800
# HELP folio:prefix_cache_hits Prefix cache hits.
# TYPE folio:prefix_cache_hits counter
folio:prefix_cache_hits_total{model_name="tiny"} 640
folio:prefix_cache_hits_total_extra{model_name="tiny"} 5
folio:num_requests_running{model_name="tiny"} 3
)";

TEST(BenchPrefixCache, SumsASampleOverLabelSetsAndMatchesWholeNames) {
  EXPECT_EQ(prometheus_sample_sum(kFolioMetrics, "folio:prefix_cache_hits_total"), 640.0);
  EXPECT_EQ(prometheus_sample_sum(kFolioMetrics, "folio:num_requests_running"), 3.0);
  EXPECT_FALSE(prometheus_sample_sum(kFolioMetrics, "folio:prefix_cache_hits").has_value());
  EXPECT_FALSE(prometheus_sample_sum(kFolioMetrics, "vllm:prefix_cache_hits_total").has_value());
  const std::string two = "m{a=\"x\"} 1.5\nm{a=\"y\"} 2\nm 0.5\nm_other 100\nm{broken 7\n";
  EXPECT_EQ(prometheus_sample_sum(two, "m"), 4.0);
  EXPECT_FALSE(prometheus_sample_sum("m{a=\"x\"} notanumber\n", "m").has_value());
}

TEST(BenchPrefixCache, ReadsFolioOrVllmCounters) {
  auto folio = parse_prefix_cache_counters(kFolioMetrics);
  ASSERT_TRUE(folio.has_value());
  EXPECT_EQ(folio->queries, 800.0);
  EXPECT_EQ(folio->hits, 640.0);
  auto vllm = parse_prefix_cache_counters(
      "vllm:prefix_cache_queries_total{engine=\"0\",model_name=\"m\"} 100.0\n"
      "vllm:prefix_cache_hits_total{engine=\"0\",model_name=\"m\"} 25.0\n");
  ASSERT_TRUE(vllm.has_value());
  EXPECT_EQ(vllm->queries, 100.0);
  EXPECT_EQ(vllm->hits, 25.0);
  EXPECT_FALSE(parse_prefix_cache_counters("folio:prefix_cache_hits_total 3\n").has_value());
  EXPECT_FALSE(parse_prefix_cache_counters("").has_value());
}

TEST(BenchPrefixCache, WarnsOnlyPastTheShare) {
  EXPECT_FALSE(prefix_cache_warning({1000, 0}, 1000).has_value());
  EXPECT_FALSE(prefix_cache_warning({1000, 100}, 1000).has_value());  // 10%: not past it
  auto w = prefix_cache_warning({1000, 640}, 800);
  ASSERT_TRUE(w.has_value());
  EXPECT_NE(w->find("80%"), std::string::npos) << *w;
  EXPECT_NE(w->find("--seed"), std::string::npos) << *w;
  EXPECT_FALSE(prefix_cache_warning({10, 10}, 0).has_value());
}

}  // namespace
}  // namespace folio::tools
