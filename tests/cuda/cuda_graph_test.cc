// Decode steps replayed as CUDA graphs against the same engine run op by op (--enforce-eager):
// the same greedy tokens wherever the eager run's top-2 gap exceeds fp16 noise, with batches
// that shrink as requests finish (so steps move between graph buckets and get padded), on a
// paged and a token-mode cache, and in a tiny pool that preempts; with an fp8 KV cache too, whose
// tokens must also stay those of the 16-bit cache wherever the top-2 gap exceeds fp8's noise.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "cuda_test_util.h"
#include "engine/engine_runner.h"
#include "model/cuda_llama_executor.h"

namespace folio {
namespace {

using testing::model_path;
using testing::run_all;

std::vector<GenerateRequest> requests(int vocab) {
  std::mt19937 rng(11);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 37; ++i) {
    GenerateRequest g;
    const int len = 3 + static_cast<int>(rng() % 60);
    for (int k = 0; k < len; ++k) g.prompt_token_ids.push_back(static_cast<int32_t>(rng() % vocab));
    g.params.temperature = 0.0f;
    g.params.max_tokens = 2 + static_cast<int>(rng() % 40);  // finish at different steps
    g.params.ignore_eos = true;
    g.params.logprobs = 2;
    reqs.push_back(std::move(g));
  }
  return reqs;
}

struct EngineRun {
  testing::RunResult result;
  int graph_steps = 0, eager_decode_steps = 0, graph_captures = 0;
  int64_t num_preemptions = 0;
};

// `conservativeness` 0: vLLM's admission, so that a tiny pool preempts.
EngineRun run(const std::string& model, bool eager, KvCacheMode mode, int num_blocks,
              KvCacheDtype kv_dtype = KvCacheDtype::kAuto, double conservativeness = 1.0) {
  LoadOptions o;
  o.model_dir = model_path(model);
  o.device = "cuda";
  EngineConfig c;
  c.dtype = "float16";
  c.enforce_eager = eager;
  c.kv_mode = mode;
  c.kv_cache_dtype = kv_dtype;
  c.block_size = mode == KvCacheMode::kToken ? 1 : 16;
  c.num_kv_blocks = num_blocks;
  c.max_total_tokens = num_blocks;
  c.sched.max_num_seqs = 64;
  c.sched.schedule_conservativeness = conservativeness;
  auto e = load_engine(o, c);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  EngineRun r;
  r.result = run_all(**e, requests(512));
  EXPECT_EQ((*e)->kv().num_free_blocks(), (*e)->kv().num_total_blocks());
  const auto* ex = dynamic_cast<const CudaLlamaExecutor*>(&(*e)->executor());
  r.graph_steps = ex ? ex->graph_steps() : -1;
  r.eager_decode_steps = ex ? ex->eager_decode_steps() : -1;
  r.graph_captures = ex ? ex->graph_captures() : -1;
  r.num_preemptions = (*e)->scheduler().stats().num_preemptions;
  return r;
}

// Tokens compared while the eager run's top-2 logprob gap exceeds `margin`.
void expect_same_tokens(const EngineRun& eager, const EngineRun& graphs, double margin,
                        int min_compared = 300) {
  int compared = 0;
  for (size_t i = 0; i < eager.result.outputs.size(); ++i) {
    ASSERT_TRUE(eager.result.add_status[i].ok());
    ASSERT_EQ(graphs.result.outputs[i].deltas.size(), 1u) << "request " << i;
    const auto& want = eager.result.outputs[i].deltas[0];
    const auto& have = graphs.result.outputs[i].deltas[0].token_ids;
    ASSERT_EQ(have.size(), want.token_ids.size()) << "request " << i;
    for (size_t s = 0; s < have.size(); ++s, ++compared) {
      const auto& top = want.logprobs[s].top;
      if (top.size() < 2 || top[0].logprob - top[1].logprob < margin) break;
      ASSERT_EQ(have[s], want.token_ids[s]) << "request " << i << " token " << s;
    }
  }
  EXPECT_GT(compared, min_compared);
}

TEST(CudaGraphs, DecodeGraphsGiveTheEagerTokens) {
  FOLIO_REQUIRE_GPU();
  for (KvCacheMode mode : {KvCacheMode::kPaged, KvCacheMode::kToken}) {
    const int blocks = mode == KvCacheMode::kToken ? 8192 : 512;
    const EngineRun eager = run("qwen3_hd64", true, mode, blocks);
    const EngineRun graphs = run("qwen3_hd64", false, mode, blocks);
    EXPECT_EQ(eager.graph_steps, 0);
    EXPECT_GT(graphs.graph_steps, 20) << "decode steps should replay graphs";
    expect_same_tokens(eager, graphs, 0.02);
  }
}

// Every bucket's graph is captured when the executor is created (the default): no decode step
// runs eagerly, and the tokens are the eager run's. FOLIO_GRAPH_WARMUP=0 captures each bucket on
// its second step instead: the first step of each bucket the batch passes through runs eagerly.
TEST(CudaGraphs, StartupCaptureLeavesNoDecodeStepEager) {
  FOLIO_REQUIRE_GPU();
  const EngineRun eager = run("llama_hd128", true, KvCacheMode::kPaged, 512);
  const EngineRun warm = run("llama_hd128", false, KvCacheMode::kPaged, 512);
  setenv("FOLIO_GRAPH_WARMUP", "0", 1);
  const EngineRun lazy = run("llama_hd128", false, KvCacheMode::kPaged, 512);
  unsetenv("FOLIO_GRAPH_WARMUP");
  EXPECT_EQ(warm.eager_decode_steps, 0);
  EXPECT_EQ(warm.graph_captures, 0);
  EXPECT_GT(lazy.eager_decode_steps, 0);
  EXPECT_GT(lazy.graph_captures, 0) << "buckets captured on their second steps";
  EXPECT_EQ(warm.graph_steps, lazy.graph_steps + lazy.eager_decode_steps)
      << "the same decode steps, every one replayed";
  expect_same_tokens(eager, warm, 0.02);
  expect_same_tokens(eager, lazy, 0.02);
}

TEST(CudaGraphs, GraphsSurvivePreemption) {
  FOLIO_REQUIRE_GPU();
  const EngineRun eager = run("llama_hd128", true, KvCacheMode::kPaged, 512);
  const EngineRun tight = run("llama_hd128", false, KvCacheMode::kPaged, 12, KvCacheDtype::kAuto,
                              /*conservativeness=*/0.0);  // 192 tokens: preempts
  EXPECT_GT(tight.graph_steps, 0);
  EXPECT_GT(tight.num_preemptions, 0);
  // Recompute re-derives KV through prefill (other kernels, other rounding): the preemption
  // tests' 0.1 margin.
  expect_same_tokens(eager, tight, 0.1);
}

TEST(CudaGraphs, Fp8KvCacheGraphsGiveTheEagerTokens) {
  FOLIO_REQUIRE_GPU();
  for (KvCacheMode mode : {KvCacheMode::kPaged, KvCacheMode::kToken}) {
    const int blocks = mode == KvCacheMode::kToken ? 8192 : 512;
    const EngineRun eager = run("qwen3_hd64", true, mode, blocks, KvCacheDtype::kFp8E4m3);
    const EngineRun graphs = run("qwen3_hd64", false, mode, blocks, KvCacheDtype::kFp8E4m3);
    EXPECT_GT(graphs.graph_steps, 20) << "decode steps should replay graphs";
    expect_same_tokens(eager, graphs, 0.02);
    // Against the 16-bit cache: e4m3 keeps 3 mantissa bits (relative error up to 1/16 per K/V
    // value), so only clear greedy choices must agree.
    const EngineRun fp16 = run("qwen3_hd64", true, mode, blocks);
    expect_same_tokens(fp16, eager, 0.5, 100);
  }
}

}  // namespace
}  // namespace folio
