// The serving load generator against a real `folio serve` stack (EngineCore on the bundled
// tiny model, AsyncEngine, Server) on 127.0.0.1, in process; the CLI path through the binary.
#include "tools/bench_serve.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "engine/async_engine.h"
#include "engine/engine_factory.h"
#include "server/server.h"

namespace folio::tools {
namespace {

struct LiveFolio {
  explicit LiveFolio(std::string api_key = "") {
    LoadOptions o;
    o.model_dir = std::string(FOLIO_SOURCE_DIR) + "/models/tiny_llama3";
    auto core = load_engine(o, EngineConfig{});
    if (!core.ok()) {
      ADD_FAILURE() << core.status().to_string();
      return;
    }
    engine = std::make_unique<AsyncEngine>(std::move(*core), "tiny", std::nullopt);
    ServerConfig c;
    c.host = "127.0.0.1";
    c.port = 0;
    c.num_io_threads = 2;
    c.shutdown_grace_ms = 200;
    c.api_key = std::move(api_key);
    server = std::make_unique<Server>(c, *engine);
    if (Status st = server->start(); !st.ok()) ADD_FAILURE() << st.to_string();
    url = "http://127.0.0.1:" + std::to_string(server->port());
  }
  ~LiveFolio() {
    if (server) {
      server->stop();
      server->wait();
    }
    if (engine) engine->shutdown();
  }
  std::unique_ptr<AsyncEngine> engine;
  std::unique_ptr<Server> server;
  std::string url;
};

ServeBenchConfig small_config(const std::string& url) {
  ServeBenchConfig c;
  c.base_url = url;
  c.workload = fixed_workload(16, 6, 20);
  c.request_rate = 200.0;
  c.max_concurrency = 6;
  c.seed = 5;
  c.request_timeout_s = 60;
  c.max_duration_s = 120;
  return c;
}

// Most requests in flight at once, from the send times and latencies.
int max_overlap(const std::vector<RequestRecord>& rs) {
  std::vector<std::pair<double, int>> edges;
  for (const auto& r : rs) {
    edges.emplace_back(r.send_time_s, +1);
    edges.emplace_back(r.send_time_s + r.e2e_s, -1);
  }
  std::sort(edges.begin(), edges.end());  // an end before a start at the same instant
  int cur = 0, best = 0;
  for (const auto& [t, d] : edges) best = std::max(best, cur += d);
  return best;
}

TEST(BenchServe, AllRequestsCompleteWithSaneMetrics) {
  LiveFolio live;
  ASSERT_TRUE(live.server);
  auto result = run_serve_benchmark(small_config(live.url));
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  ASSERT_EQ(result->records.size(), 20u);
  double last_end = 0;
  for (const auto& r : result->records) {
    ASSERT_TRUE(r.success) << r.error;
    EXPECT_EQ(r.output_tokens, 6);  // ignore_eos: exactly max_tokens
    EXPECT_EQ(r.prompt_len, 16);
    EXPECT_GT(r.ttft_s, 0.0);
    EXPECT_GE(r.e2e_s, r.ttft_s);
    EXPECT_GE(r.itl_s.size(), 1u);  // several chunks (a read may carry more than one)
    EXPECT_LE(r.itl_s.size(), 5u);
    double itl_sum = 0;
    for (double g : r.itl_s) itl_sum += g;
    EXPECT_LE(itl_sum, r.e2e_s - r.ttft_s + 1e-9);
    last_end = std::max(last_end, r.send_time_s + r.e2e_s);
  }
  EXPECT_LE(max_overlap(result->records), 6);
  EXPECT_NEAR(result->duration_s, last_end, 0.05);
  // Poisson at 200/s: 19 gaps of 5 ms on average; sends are spread, not all at zero.
  EXPECT_GT(result->records.back().send_time_s, 0.0);
  auto j = serve_metrics_json(result->records, result->duration_s);
  EXPECT_EQ(j["completed"], 20);
  EXPECT_EQ(j["failed"], 0);
  EXPECT_EQ(j["total_output_tokens"], 120);
  EXPECT_EQ(j["total_input_tokens"], 320);
  EXPECT_NEAR(j["request_throughput"].get<double>() * result->duration_s, 20.0, 1e-6);
  for (const char* m : {"ttft", "tpot", "itl", "e2el"}) {
    const std::string k = std::string(m) + "_ms";
    EXPECT_GT(j["mean_" + k].get<double>(), 0.0) << k;
    EXPECT_LE(j["median_" + k].get<double>(), j["p99_" + k].get<double>()) << k;
  }
  EXPECT_LE(j["p99_ttft_ms"].get<double>(), j["p99_e2el_ms"].get<double>());
}

// The server's prefix-cache counters around each run: a second run with the same seed sends the
// same prompts, and the hits it reports (and warns about) are the first run's cached blocks.
TEST(BenchServe, ReportsPrefixCacheHitsOfARepeatedSeed) {
  LiveFolio live;
  ASSERT_TRUE(live.server);
  auto c = small_config(live.url);
  c.workload = fixed_workload(40, 2, 20);  // two full 16-token blocks per prompt can hit
  auto first = run_serve_benchmark(c);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  ASSERT_TRUE(first->prefix_cache.has_value());
  EXPECT_GT(first->prefix_cache->queries, 0.0);
  EXPECT_EQ(first->prefix_cache->hits, 0.0);  // random prompts share no block
  auto second = run_serve_benchmark(c);
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  ASSERT_TRUE(second->prefix_cache.has_value());
  EXPECT_GE(second->prefix_cache->hits, 20.0 * 32);
  EXPECT_GE(second->prefix_cache->queries, second->prefix_cache->hits);
  EXPECT_TRUE(prefix_cache_warning(*second->prefix_cache, 20 * 40).has_value());
  c.seed = 6;  // new prompts: no hits again
  auto third = run_serve_benchmark(c);
  ASSERT_TRUE(third.ok());
  ASSERT_TRUE(third->prefix_cache.has_value());
  EXPECT_EQ(third->prefix_cache->hits, 0.0);
}

// Outputs that stop early: sent with max_tokens 40 and EOS honoured, the client leaves after 6
// tokens (or sooner, at a real EOS of the tiny model) and the server aborts the rest: far fewer
// than 20 x 40 tokens are generated, and nothing is left running.
TEST(BenchServe, OutputsThatStopEarlyCloseTheirStreams) {
  LiveFolio live;
  ASSERT_TRUE(live.server);
  ServeBenchConfig c = small_config(live.url);
  for (auto& item : c.workload) item.max_tokens = 40;
  auto result = run_serve_benchmark(c);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  int at_length = 0;
  for (const auto& r : result->records) {
    ASSERT_TRUE(r.success) << r.error;
    EXPECT_GE(r.output_tokens, 1);
    EXPECT_LE(r.output_tokens, 8);  // 6, or a chunk or two more when they came together
    at_length += r.output_tokens >= 6 ? 1 : 0;
  }
  EXPECT_GE(at_length, 10);
  EngineStats s;
  for (int i = 0; i < 500; ++i) {  // the aborts land within a step or two of the disconnect
    s = live.engine->stats();
    if (s.num_running == 0 && s.num_waiting == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(s.num_running, 0);
  EXPECT_EQ(s.num_waiting, 0);
  EXPECT_LT(s.generation_tokens, 20u * 15u) << "the server ran on toward max_tokens";
}

TEST(BenchServe, InfiniteRateNoCap) {
  LiveFolio live;
  ASSERT_TRUE(live.server);
  auto c = small_config(live.url);
  c.request_rate = std::numeric_limits<double>::infinity();
  c.max_concurrency = 0;
  auto result = run_serve_benchmark(c);
  ASSERT_TRUE(result.ok());
  for (const auto& r : result->records) {
    EXPECT_TRUE(r.success) << r.error;
    EXPECT_LT(r.send_time_s, 0.5);  // all sent at once
  }
}

TEST(BenchServe, FailuresAreCountedNotFatal) {
  LiveFolio live("sekrit");
  ASSERT_TRUE(live.server);
  auto c = small_config(live.url);
  c.workload = fixed_workload(8, 2, 4);
  auto result = run_serve_benchmark(c);  // no key: 401 for every request
  ASSERT_TRUE(result.ok());
  for (const auto& r : result->records) {
    EXPECT_FALSE(r.success);
    EXPECT_NE(r.error.find("HTTP 401"), std::string::npos) << r.error;
  }
  c.api_key = "sekrit";
  result = run_serve_benchmark(c);
  ASSERT_TRUE(result.ok());
  for (const auto& r : result->records) EXPECT_TRUE(r.success) << r.error;
  // Prompt ids outside the model's vocabulary: the server refuses them with a 400.
  c.vocab_size = 1 << 20;
  c.workload = fixed_workload(64, 2, 2);
  result = run_serve_benchmark(c);
  ASSERT_TRUE(result.ok());
  for (const auto& r : result->records) EXPECT_NE(r.error.find("HTTP 400"), std::string::npos);
}

TEST(BenchServe, NothingListeningFailsFast) {
  std::string url;
  {
    LiveFolio live;  // take a free port, then close it
    url = live.url;
  }
  auto c = small_config(url);
  c.workload = fixed_workload(8, 2, 3);
  auto result = run_serve_benchmark(c);
  ASSERT_TRUE(result.ok());
  for (const auto& r : result->records) {
    EXPECT_FALSE(r.success);
    EXPECT_NE(r.error.find("connect"), std::string::npos) << r.error;
  }
  c.base_url = "https://127.0.0.1:1";
  EXPECT_FALSE(run_serve_benchmark(c).ok());  // https is refused before anything is sent
}

TEST(BenchServe, CommandLineWritesTheReport) {
  LiveFolio live;
  ASSERT_TRUE(live.server);
  const std::string dir = ::testing::TempDir() + "/" + std::to_string(getpid());
  const std::string json_path = dir + "_serve.json", out_path = dir + "_serve.txt";
  const std::string cmd = "timeout 120 " + std::string(FOLIO_BINARY) + " bench serve --base-url " +
                          live.url + " --model tiny --input-len 12 --output-len 4 --num-prompts 10" +
                          " --request-rate 100 --max-concurrency 4 --output-json " + json_path +
                          " >" + out_path + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream out(out_path);
  std::stringstream text;
  text << out.rdbuf();
  ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << text.str();
  EXPECT_NE(text.str().find("Successful requests:"), std::string::npos);
  std::ifstream in(json_path);
  auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["completed"], 10);
  EXPECT_EQ(j["total_output_tokens"], 40);
  EXPECT_EQ(j["request_rate"], 100.0);
  EXPECT_EQ(j["max_concurrency"], 4);
  for (const char* k : {"p99_ttft_ms", "median_tpot_ms", "mean_itl_ms", "p99_e2el_ms", "commit",
                        "date", "command", "gpu_name"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_NE(text.str().find("Prefix cache hit tokens:"), std::string::npos);
  EXPECT_EQ(j["prefix_cache_hit_tokens"], 0);  // 12-token prompts fill no block to reuse
  EXPECT_GE(j["prefix_cache_query_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(text.str().find("warning"), std::string::npos) << text.str();
}

}  // namespace
}  // namespace folio::tools
