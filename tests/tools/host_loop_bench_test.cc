// The engine's host loop alone (schedule, batch building, output processing) at B1's load, the
// executor replaced by one that samples instantly (as the CUDA executor's device sampling returns
// tokens): the host time per step that `folio bench throughput` reports as "Host loop", with no
// GPU. Runs only with FOLIO_HOST_BENCH=1 (a figure, nothing asserted about speed); perf it to see
// where a step's host time goes:
//   FOLIO_HOST_BENCH=1 perf record -g build/tests/tools/folio_tools_tests
//       --gtest_filter='HostLoopBench.*'   (one command line)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/engine_core.h"
#include "instant_executor.h"
#include "model/model_config.h"
#include "tools/bench_meta.h"
#include "tools/bench_throughput.h"
#include "tools/bench_workload.h"

namespace folio::tools {
namespace {

TEST(HostLoopBench, B1PagedAndTokenMode) {
  if (!std::getenv("FOLIO_HOST_BENCH")) GTEST_SKIP() << "set FOLIO_HOST_BENCH=1 to time it";
  const std::string root = FOLIO_SOURCE_DIR;
  std::ifstream f(root + "/configs/llama-3-8b.json");
  auto model = ModelConfig::from_json(nlohmann::json::parse(f), "llama-3-8b.json");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  auto items = load_workload(root + "/bench/workloads/sharegpt_like_1000.jsonl", 0);
  ASSERT_TRUE(items.ok()) << items.status().to_string();
  for (bool token : {false, true}) {
    EngineConfig c;
    c.kv_mode = token ? KvCacheMode::kToken : KvCacheMode::kPaged;
    c.block_size = token ? 1 : 16;
    c.sched.max_num_seqs = 1024;
    c.sched.max_num_batched_tokens = 16384;
    const int blocks = token ? 885216 : 55326;  // the H200's pool (session 26's B1 log)
    auto engine = EngineCore::create(
        c, *model, std::make_unique<InstantExecutor>(model->vocab_size, c.block_size, blocks),
        nullptr);
    ASSERT_TRUE(engine.ok()) << engine.status().to_string();
    auto r = run_throughput(**engine, *items, 1);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const EngineCounters& n = (*engine)->counters();
    std::printf("%s, %d requests: ", token ? "token mode" : "paged 16", r->num_requests);
    print_host_loop(host_loop_json(n));
  }
}

}  // namespace
}  // namespace folio::tools
