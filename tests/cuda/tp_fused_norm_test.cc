// The all-reduce + RMSNorm fusion under tensor parallelism, end to end: the engine on a
// Llama-3-8B-shaped dummy model (hidden 4096, two layers) with the fused launches (the default)
// against FOLIO_TP_FUSED_NORM=0 (an all-reduce, then rms_norm). The fusion is bit-identical by
// construction, so every token and logprob must match, over prefill chunks and decode steps at
// batch > 1 (batch 1 keeps its norms inside the skinny GEMVs). Skips without 2 GPUs.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "cuda_test_util.h"
#include "engine/engine_factory.h"
#include "engine/engine_runner.h"

namespace folio {
namespace {

TEST(TpFusedNorm, EngineMatchesTheSeparateNormBitForBit) {
  FOLIO_REQUIRE_GPU();
  auto n = cuda::device_count();
  if (!n.ok() || *n < 2) GTEST_SKIP() << "needs 2 GPUs";
  auto j = read_json_file(std::string(FOLIO_SOURCE_DIR) + "/configs/llama-3-8b.json");
  ASSERT_TRUE(j.ok()) << j.status().to_string();
  (*j)["num_hidden_layers"] = 2;
  const std::string config_path = ::testing::TempDir() + "/folio_tp_fused_norm_config.json";
  {
    std::ofstream f(config_path);
    f << j->dump();
    ASSERT_TRUE(f.good()) << config_path;
  }

  std::mt19937 rng(3);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 12; ++i) {
    GenerateRequest g;
    const int len = 5 + static_cast<int>(rng() % 300);  // some prompts take two chunks
    for (int t = 0; t < len; ++t) g.prompt_token_ids.push_back(static_cast<int32_t>(rng() % 128000));
    g.params.max_tokens = 12;
    g.params.ignore_eos = true;
    g.params.has_temperature = true;
    g.params.temperature = 0.0f;
    g.params.logprobs = 2;
    reqs.push_back(std::move(g));
  }
  auto run = [&](const char* fused) {
    setenv("FOLIO_TP_FUSED_NORM", fused, 1);
    EngineConfig c;
    c.tensor_parallel_size = 2;
    c.num_kv_blocks = 256;
    c.sched.max_num_batched_tokens = 256;
    LoadOptions o;
    o.device = "cuda";
    o.load_format = "dummy";
    o.model_config_file = config_path;
    auto engine = load_engine(o, c);
    unsetenv("FOLIO_TP_FUSED_NORM");
    if (!engine.ok()) {
      ADD_FAILURE() << engine.status().to_string();
      return testing::RunResult{};
    }
    return testing::run_all(**engine, reqs);
  };
  const auto want = run("0"), got = run("1");
  ASSERT_EQ(got.outputs.size(), reqs.size());
  ASSERT_EQ(want.outputs.size(), reqs.size());
  size_t tokens = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_EQ(got.outputs[i].deltas.size(), 1u);
    const auto& w = want.outputs[i].deltas[0];
    const auto& g = got.outputs[i].deltas[0];
    ASSERT_EQ(g.token_ids, w.token_ids) << "request " << i;
    ASSERT_EQ(g.logprobs.size(), w.logprobs.size());
    for (size_t t = 0; t < g.logprobs.size(); ++t)
      EXPECT_EQ(g.logprobs[t].logprob, w.logprobs[t].logprob) << "request " << i << " token " << t;
    tokens += g.token_ids.size();
  }
  std::printf("tp2 fused norm: %zu tokens and logprobs identical\n", tokens);
}

}  // namespace
}  // namespace folio
