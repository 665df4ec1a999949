// The all-reduce forms under tensor parallelism, end to end: the engine on a Llama-3-8B-shaped
// dummy model (hidden 4096, two layers), over prefill chunks and decode steps at batch > 1, with
// a form switched by its environment variable against the other. Each form is bit-identical by
// construction, so every token and logprob must match:
// - the all-reduce + RMSNorm fusion (the default) against FOLIO_TP_FUSED_NORM=0 (an all-reduce,
//   then rms_norm; batch 1 keeps its norms inside the skinny GEMVs);
// - every all-reduce by the two-shot form (FOLIO_PEER_TWO_SHOT_FROM=0) against none
//   (FOLIO_PEER_TWO_SHOT_FROM=off: one-shot within the staging, NCCL beyond; two ranks' NCCL sum
//   is the fp32 sum rounded once);
// - batch 1's gate_up -> down as a SkinnyFlow pair under TP (FOLIO_SKINNY_FLOW=1) against =0;
// - o_proj and down by chunks of rows with each chunk's all-reduce on a second stream
//   (FOLIO_TP_OVERLAP_*) against the whole product, then the all-reduce: rows are independent,
//   but a chunk's GEMM may take another cuBLASLt kernel, so logprobs are compared within a
//   tolerance (the tokens must match; on two H200s they came out identical).
// Skips without 2 GPUs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/peer_all_reduce.h"
#include "base/file_util.h"
#include "cuda_test_util.h"
#include "engine/engine_factory.h"
#include "engine/engine_runner.h"

namespace folio {
namespace {

using EnvVars = std::vector<std::pair<const char*, const char*>>;

// The engine's outputs for `requests` greedy requests (12: some prompts take two chunks) with
// `vars` set while the engine is made (the executor reads them then).
testing::RunResult run_with(const EnvVars& vars, int max_batched_tokens, int requests = 12) {
  auto j = read_json_file(std::string(FOLIO_SOURCE_DIR) + "/configs/llama-3-8b.json");
  if (!j.ok()) {
    ADD_FAILURE() << j.status().to_string();
    return {};
  }
  (*j)["num_hidden_layers"] = 2;
  const std::string config_path = ::testing::TempDir() + "/folio_tp_all_reduce_config.json";
  {
    std::ofstream f(config_path);
    f << j->dump();
    EXPECT_TRUE(f.good()) << config_path;
  }
  std::mt19937 rng(3);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < requests; ++i) {
    GenerateRequest g;
    const int len = 5 + static_cast<int>(rng() % 300);
    for (int t = 0; t < len; ++t)
      g.prompt_token_ids.push_back(static_cast<int32_t>(rng() % 128000));
    g.params.max_tokens = 12;
    g.params.ignore_eos = true;
    g.params.has_temperature = true;
    g.params.temperature = 0.0f;
    g.params.logprobs = 2;
    reqs.push_back(std::move(g));
  }
  // Settings made for the whole binary (FOLIO_... before the command) come back afterwards.
  std::vector<std::pair<const char*, std::optional<std::string>>> saved;
  for (const auto& [var, value] : vars) {
    const char* old = std::getenv(var);
    saved.emplace_back(var, old ? std::optional<std::string>(old) : std::nullopt);
    setenv(var, value, 1);
  }
  EngineConfig c;
  c.tensor_parallel_size = 2;
  c.num_kv_blocks = 256;
  c.sched.max_num_batched_tokens = max_batched_tokens;
  LoadOptions o;
  o.device = "cuda";
  o.load_format = "dummy";
  o.model_config_file = config_path;
  auto engine = load_engine(o, c);
  for (const auto& [var, old] : saved) {
    if (old)
      setenv(var, old->c_str(), 1);
    else
      unsetenv(var);
  }
  if (!engine.ok()) {
    ADD_FAILURE() << engine.status().to_string();
    return {};
  }
  auto result = testing::run_all(**engine, reqs);
  EXPECT_EQ(result.outputs.size(), reqs.size());
  return result;
}

struct Compared {
  size_t tokens = 0;
  float worst = 0;  // the largest logprob difference
};

// Every request's tokens equal and logprobs within `tol` (0: equal).
Compared expect_matching(const testing::RunResult& want, const testing::RunResult& got, float tol) {
  Compared c;
  EXPECT_EQ(got.outputs.size(), want.outputs.size());
  for (size_t i = 0; i < want.outputs.size() && i < got.outputs.size(); ++i) {
    EXPECT_EQ(got.outputs[i].deltas.size(), 1u);
    if (got.outputs[i].deltas.size() != 1 || want.outputs[i].deltas.size() != 1) continue;
    const auto& w = want.outputs[i].deltas[0];
    const auto& g = got.outputs[i].deltas[0];
    EXPECT_EQ(g.token_ids, w.token_ids) << "request " << i;
    EXPECT_EQ(g.logprobs.size(), w.logprobs.size()) << "request " << i;
    for (size_t t = 0; t < g.logprobs.size() && t < w.logprobs.size(); ++t) {
      const float d = std::fabs(g.logprobs[t].logprob - w.logprobs[t].logprob);
      c.worst = std::max(c.worst, d);
      EXPECT_LE(d, tol) << "request " << i << " token " << t << ": " << g.logprobs[t].logprob
                        << " against " << w.logprobs[t].logprob;
    }
    c.tokens += g.token_ids.size();
  }
  return c;
}

bool two_gpus() {
  auto n = cuda::device_count();
  return n.ok() && *n >= 2;
}

TEST(TpFusedNorm, EngineMatchesTheSeparateNormBitForBit) {
  FOLIO_REQUIRE_GPU();
  if (!two_gpus()) GTEST_SKIP() << "needs 2 GPUs";
  const auto want = run_with({{"FOLIO_TP_FUSED_NORM", "0"}}, 256);
  const auto got = run_with({{"FOLIO_TP_FUSED_NORM", "1"}}, 256);
  ASSERT_EQ(want.outputs.size(), 12u);
  std::printf("tp2 fused norm: %zu tokens and logprobs identical\n",
              expect_matching(want, got, 0).tokens);
}

// 512-token steps: 4 MiB messages, past the one-shot staging of 256 sequences (2 MiB), so "off"
// sends them to NCCL; decode steps (captured in graphs) take the two-shot too with "0".
TEST(TpTwoShot, EngineMatchesOneShotAndNcclBitForBit) {
  FOLIO_REQUIRE_GPU();
  if (!two_gpus()) GTEST_SKIP() << "needs 2 GPUs";
  // Where the two-shot cannot run, "0" would fall back to the forms it is compared with.
  if (!cuda::PeerAllReduceRank::all_peers_reachable(2)) GTEST_SKIP() << "no peer access";
  ASSERT_GE(cuda::peer_two_shot_resident_blocks(2), cuda::kTwoShotBlocksDefault);
  const auto want = run_with({{"FOLIO_PEER_TWO_SHOT_FROM", "off"}}, 512);
  const auto got = run_with({{"FOLIO_PEER_TWO_SHOT_FROM", "0"}}, 512);
  ASSERT_EQ(want.outputs.size(), 12u);
  std::printf("tp2 two-shot: %zu tokens and logprobs identical\n",
              expect_matching(want, got, 0).tokens);
}

// Steps of 300-512 tokens (past the fused norm's staging of 2 MiB): 3 chunks of 192 rows at most
// (the last one short) with the two-shot's grid cut to 8 blocks; 4 chunks by NCCL on the second
// stream. Against no overlap: the same forms unchunked.
TEST(TpOverlap, EngineMatchesTheUnchunkedAllReduce) {
  FOLIO_REQUIRE_GPU();
  if (!two_gpus()) GTEST_SKIP() << "needs 2 GPUs";
  const auto want = run_with({{"FOLIO_TP_OVERLAP_CHUNKS", "0"}}, 512);
  ASSERT_EQ(want.outputs.size(), 12u);
  const auto got = run_with({{"FOLIO_TP_OVERLAP_CHUNKS", "3"},
                             {"FOLIO_TP_OVERLAP_FROM", "300"},
                             {"FOLIO_TP_OVERLAP_BLOCKS", "8"}},
                            512);
  std::printf("tp2 overlap (peer): largest logprob difference %g\n",
              expect_matching(want, got, 0.05f).worst);
  const auto nccl = run_with({{"FOLIO_TP_OVERLAP_CHUNKS", "4"},
                              {"FOLIO_TP_OVERLAP_FROM", "300"},
                              {"FOLIO_PEER_TWO_SHOT_FROM", "off"}},
                             512);
  std::printf("tp2 overlap (NCCL): largest logprob difference %g\n",
              expect_matching(want, nccl, 0.05f).worst);
}

// Batch-1 decode (one request) under TP with gate_up -> down as a SkinnyFlow pair
// (FOLIO_SKINNY_FLOW=1) against down's PDL wait: the same arithmetic, so the same bits.
TEST(TpSkinnyFlow, EngineMatchesThePdlWaitBitForBit) {
  FOLIO_REQUIRE_GPU();
  if (!two_gpus()) GTEST_SKIP() << "needs 2 GPUs";
  const auto want = run_with({{"FOLIO_SKINNY_FLOW", "0"}}, 256, 1);
  const auto got = run_with({{"FOLIO_SKINNY_FLOW", "1"}}, 256, 1);
  ASSERT_EQ(want.outputs.size(), 1u);
  std::printf("tp2 skinny flow: %zu tokens and logprobs identical\n",
              expect_matching(want, got, 0).tokens);
}

// A malformed setting fails the engine's creation with the variable named, on one GPU too.
void expect_rejected(const char* var, const char* value) {
  setenv(var, value, 1);
  EngineConfig c;
  c.num_kv_blocks = 64;
  LoadOptions o;
  o.device = "cuda";
  o.load_format = "dummy";
  o.model_config_file = std::string(FOLIO_SOURCE_DIR) + "/configs/llama-3-8b.json";
  auto engine = load_engine(o, c);
  unsetenv(var);
  ASSERT_FALSE(engine.ok()) << var;
  EXPECT_NE(engine.status().to_string().find(std::string(var) + "=" + value), std::string::npos)
      << engine.status().to_string();
}

TEST(TpOverlap, RejectsAMalformedSetting) {
  FOLIO_REQUIRE_GPU();
  expect_rejected("FOLIO_TP_OVERLAP_CHUNKS", "four");
}

TEST(TpSkinnyFlow, RejectsAMalformedSetting) {
  FOLIO_REQUIRE_GPU();
  expect_rejected("FOLIO_SKINNY_FLOW", "yes");
}

}  // namespace
}  // namespace folio
