// The whole engine on the GPU with a sliding window whose blocks are freed (paged mode), on a
// tiny Mistral (window 24) and a cache of 11 usable blocks of 16 (176 tokens): less than one of
// the requests, which every run must still take to its full length (without the freeing the
// cache would end each at 176 tokens).
//  - One sequence at a time, prompts in chunks of 16: the roomy and the tiny cache run the same
//    steps, so tokens and logprobs must be the same bits, while decode reads only the window
//    from recycled blocks and prefill chunks read key tiles that cross the null block.
//  - Six at a time with recompute and swap preemption: every request reaches its length and
//    every block comes back (the tiny random model's top-2 gaps sit at bf16 noise, so tokens
//    are compared only in the case above).
#include <random>

#include "cuda_test_util.h"
#include "engine/engine_runner.h"
#include "tiny_checkpoint.h"

namespace folio {
namespace {

Result<std::unique_ptr<EngineCore>> cuda_engine(const std::string& dir, const EngineConfig& c) {
  LoadOptions o;
  o.model_dir = dir;
  o.device = "cuda";
  return load_engine(o, c);
}

std::vector<GenerateRequest> long_requests(int count, int prompt, int vocab, int logprobs) {
  std::mt19937 rng(77);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < count; ++i) {
    GenerateRequest g;
    for (int t = 0; t < prompt; ++t)
      g.prompt_token_ids.push_back(static_cast<int32_t>(rng() % vocab));
    g.params.temperature = 0.0f;
    g.params.has_temperature = true;
    g.params.max_tokens = 200;
    g.params.ignore_eos = true;
    if (logprobs > 0) g.params.logprobs = logprobs;
    reqs.push_back(std::move(g));
  }
  return reqs;
}

std::string window_checkpoint() {
  testing::TinyModelSpec s;
  s.architecture = "MistralForCausalLM";
  s.kv_heads = 1;
  s.head_dim = 128;
  s.config_keys["sliding_window"] = 24;
  return testing::write_tiny_checkpoint(s);
}

EngineConfig roomy_config() {
  EngineConfig c;
  c.num_kv_blocks = 1024;
  c.sched.max_model_len = 512;
  return c;
}

TEST(CudaWindowEngine, OneAtATimeTheTinyCacheGivesTheSameBits) {
  FOLIO_REQUIRE_GPU();
  const std::string dir = window_checkpoint();
  EngineConfig c = roomy_config();
  c.sched.max_num_seqs = 1;
  c.sched.max_num_batched_tokens = 16;
  auto roomy = cuda_engine(dir, c);
  ASSERT_TRUE(roomy.ok()) << roomy.status().to_string();
  const auto reqs = long_requests(3, 100, 384, 2);
  const testing::RunResult want = testing::run_all(**roomy, reqs);
  c.num_kv_blocks = 12;  // one is the null block
  auto tiny = cuda_engine(dir, c);
  ASSERT_TRUE(tiny.ok()) << tiny.status().to_string();
  ASSERT_EQ((*tiny)->kv().num_total_blocks(), 11);
  const testing::RunResult got = testing::run_all(**tiny, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(got.outputs[i].error.ok()) << got.outputs[i].error.message();
    ASSERT_EQ(got.outputs[i].deltas.size(), 1u);
    const CompletionDelta& a = want.outputs[i].deltas[0];
    const CompletionDelta& b = got.outputs[i].deltas[0];
    ASSERT_EQ(b.token_ids.size(), 200u) << "request " << i;
    EXPECT_EQ(b.token_ids, a.token_ids) << "request " << i;
    ASSERT_EQ(b.logprobs.size(), a.logprobs.size());
    for (size_t t = 0; t < a.logprobs.size(); ++t)
      ASSERT_EQ(b.logprobs[t].logprob, a.logprobs[t].logprob) << "request " << i << " token " << t;
  }
  EXPECT_EQ((*tiny)->kv().num_used_blocks(), 0);
  EXPECT_TRUE((*tiny)->kv().check_invariants().ok());
}

TEST(CudaWindowEngine, PreemptedRequestsRunToTheirLength) {
  FOLIO_REQUIRE_GPU();
  const std::string dir = window_checkpoint();
  for (PreemptionMode mode : {PreemptionMode::kRecompute, PreemptionMode::kSwap}) {
    const char* what = mode == PreemptionMode::kSwap ? "swap" : "recompute";
    EngineConfig c = roomy_config();
    c.num_kv_blocks = 12;
    c.sched.preemption_mode = mode;
    c.sched.schedule_conservativeness = 0.0;  // vLLM's admission: the tiny pool preempts
    c.sched.max_num_batched_tokens = 32;      // recomputed prompts run in chunks
    c.swap_space_gib = mode == PreemptionMode::kSwap ? 1.0 / 1024 : 0.0;
    auto engine = cuda_engine(dir, c);
    ASSERT_TRUE(engine.ok()) << what << ": " << engine.status().to_string();
    const testing::RunResult got = testing::run_all(**engine, long_requests(6, 40, 384, 0));
    for (const RequestOutput& o : got.outputs) {
      ASSERT_TRUE(o.error.ok()) << what << ": " << o.error.message();
      ASSERT_EQ(o.deltas.size(), 1u) << what;
      EXPECT_EQ(o.deltas[0].token_ids.size(), 200u) << what;
    }
    EXPECT_GT((*engine)->scheduler().stats().num_preemptions, 0) << what;
    EXPECT_EQ((*engine)->kv().num_used_blocks(), 0) << what;
    EXPECT_TRUE((*engine)->kv().check_invariants().ok()) << what;
  }
}

}  // namespace
}  // namespace folio
