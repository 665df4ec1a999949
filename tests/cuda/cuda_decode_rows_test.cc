// The order of a step's decode rows (SchedulerConfig::decode_rows_longest_first, on by default
// since session 42) must not change what a request gets on the GPU: every kernel of a step works
// per row or per sequence (GEMM rows, attention by (sequence, KV head), sampling by the request's
// own Philox stream), and the step's shape (its row count, its context lengths as a set) is the
// same in either order. So tokens and logprobs must be equal bit for bit, paged and token mode,
// CUDA graphs and eager.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "cuda_test_util.h"
#include "engine/engine_runner.h"
#include "model/cuda_llama_executor.h"

namespace folio {
namespace {

using testing::model_path;
using testing::run_all;

// Prompts from 3 to ~600 tokens, so that a step's decode contexts are uneven and their longest
// first order is far from their arrival order; outputs of 4-40 tokens, so that the set of
// decoding sequences changes as requests end. Every third request samples with its own seed.
std::vector<GenerateRequest> uneven_requests(int vocab) {
  std::mt19937 rng(42);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 24; ++i) {
    const int len =
        i % 5 == 0 ? 300 + static_cast<int>(rng() % 300) : 3 + static_cast<int>(rng() % 90);
    GenerateRequest g;
    for (int t = 0; t < len; ++t) g.prompt_token_ids.push_back(static_cast<int32_t>(rng() % vocab));
    g.params.max_tokens = 4 + static_cast<int>(rng() % 37);
    g.params.ignore_eos = true;
    g.params.logprobs = 2;
    g.params.has_temperature = true;
    g.params.temperature = i % 3 == 0 ? 0.8f : 0.0f;
    if (i % 3 == 0) g.params.seed = 7 + i;
    reqs.push_back(std::move(g));
  }
  return reqs;
}

TEST(CudaDecodeRows, LongestFirstGivesTheQueueOrdersTokensAndLogprobs) {
  FOLIO_REQUIRE_GPU();
  const std::vector<GenerateRequest> reqs = uneven_requests(512);
  for (const bool token : {false, true})
    for (const bool eager : {false, true}) {
      auto run = [&](bool longest_first) {
        EngineConfig c;
        c.kv_mode = token ? KvCacheMode::kToken : KvCacheMode::kPaged;
        c.block_size = token ? 1 : 16;
        c.num_kv_blocks = 1024;
        c.max_total_tokens = 16384;
        c.sched.max_num_batched_tokens = 512;  // the long prompts take several chunked steps
        c.sched.max_num_seqs = 64;
        c.sched.decode_rows_longest_first = longest_first;
        c.enforce_eager = eager;
        LoadOptions o;
        o.model_dir = model_path("llama_hd128");
        o.device = "cuda";
        auto engine = load_engine(o, c);
        EXPECT_TRUE(engine.ok()) << engine.status().to_string();
        return run_all(**engine, reqs);
      };
      const std::string what =
          std::string(token ? "token" : "paged") + (eager ? " eager" : " graphs");
      const auto queue = run(false), longest = run(true);
      for (size_t i = 0; i < reqs.size(); ++i) {
        ASSERT_EQ(queue.outputs[i].deltas.size(), 1u) << what;
        ASSERT_EQ(longest.outputs[i].deltas.size(), 1u) << what;
        const auto& q = queue.outputs[i].deltas[0];
        const auto& l = longest.outputs[i].deltas[0];
        ASSERT_EQ(q.token_ids.size(), static_cast<size_t>(reqs[i].params.max_tokens)) << what;
        ASSERT_EQ(l.token_ids, q.token_ids) << what << " request " << i;
        ASSERT_EQ(l.logprobs.size(), q.logprobs.size()) << what;
        for (size_t t = 0; t < l.logprobs.size(); ++t)
          EXPECT_EQ(l.logprobs[t].logprob, q.logprobs[t].logprob)
              << what << " request " << i << " token " << t;
      }
    }
}

}  // namespace
}  // namespace folio
