// Decoding methods end to end on the GPU: device sampling against the host sampler on the same
// GPU logits (identical tokens and logprobs), n > 1 with prefix caching and copy-on-write, and
// beam search against transformers' beam goldens.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "base/file_util.h"
#include "cuda_test_util.h"
#include "engine/engine_runner.h"

namespace folio {
namespace {

using testing::model_path;
using testing::run_all;

Result<std::unique_ptr<EngineCore>> cuda_engine(const std::string& model, const EngineConfig& c) {
  LoadOptions o;
  o.model_dir = model_path(model);
  o.device = "cuda";
  return load_engine(o, c);
}

// Seeded requests exercising every sampler feature, some sharing a prompt prefix, n up to 3.
std::vector<GenerateRequest> sampling_requests(int vocab) {
  std::mt19937 rng(77);
  std::vector<int32_t> shared(37);
  for (auto& t : shared) t = static_cast<int32_t>(rng() % vocab);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 24; ++i) {
    GenerateRequest g;
    if (i % 2 == 0) g.prompt_token_ids = shared;
    const int extra = 1 + static_cast<int>(rng() % 30);
    for (int k = 0; k < extra; ++k) g.prompt_token_ids.push_back(static_cast<int32_t>(rng() % vocab));
    SamplingParams& p = g.params;
    p.max_tokens = 12;
    p.ignore_eos = true;
    p.n = 1 + i % 3;
    p.seed = 100 + i;
    p.temperature = i % 5 == 0 ? 0.0f : 0.6f + 0.1f * static_cast<float>(i % 4);
    p.top_k = i % 3 == 0 ? 40 : -1;
    p.top_p = i % 4 == 1 ? 0.85f : 1.0f;
    p.min_p = i % 6 == 2 ? 0.05f : 0.0f;
    p.repetition_penalty = i % 7 == 3 ? 1.2f : 1.0f;
    p.frequency_penalty = i % 5 == 4 ? 0.3f : 0.0f;
    p.presence_penalty = i % 8 == 5 ? 0.4f : 0.0f;
    if (i % 9 == 0) p.logit_bias = {{11, 3.0f}};
    if (i % 4 == 2) p.min_tokens = 5;
    p.logprobs = i % 3 == 1 ? 5 : 0;
    reqs.push_back(std::move(g));
  }
  return reqs;
}

// The host sampler on downloaded logits and the device sampler see the same GPU logits (same
// batches, deterministic kernels), so every token and logprob must agree.
TEST(CudaDecoding, DeviceSamplingEqualsHostSampling) {
  FOLIO_REQUIRE_GPU();
  auto run = [](bool device) {
    EngineConfig c;
    c.num_kv_blocks = 256;
    c.block_size = 16;
    c.device_sampling = device;
    auto e = cuda_engine("llama_hd128", c);
    EXPECT_TRUE(e.ok()) << e.status().to_string();
    auto res = run_all(**e, sampling_requests(1000));
    EXPECT_EQ((*e)->kv().num_free_blocks(), (*e)->kv().num_total_blocks());
    EXPECT_GT((*e)->kv().stats().cow_copies, 0) << "n > 1 siblings should copy a shared block";
    return res;
  };
  const auto host = run(false), dev = run(true);
  int tokens = 0;
  for (size_t i = 0; i < host.outputs.size(); ++i) {
    ASSERT_TRUE(host.add_status[i].ok()) << host.add_status[i].to_string();
    ASSERT_EQ(dev.outputs[i].deltas.size(), host.outputs[i].deltas.size()) << "request " << i;
    for (size_t j = 0; j < host.outputs[i].deltas.size(); ++j) {
      const auto& h = host.outputs[i].deltas[j];
      const auto& d = dev.outputs[i].deltas[j];
      ASSERT_EQ(d.token_ids, h.token_ids) << "request " << i << " sequence " << j;
      EXPECT_NEAR(d.cumulative_logprob, h.cumulative_logprob, 1e-3) << "request " << i;
      ASSERT_EQ(d.logprobs.size(), h.logprobs.size());
      for (size_t s = 0; s < h.logprobs.size(); ++s) {
        ASSERT_EQ(d.logprobs[s].top.size(), h.logprobs[s].top.size());
        for (size_t k = 0; k < h.logprobs[s].top.size(); ++k) {
          EXPECT_EQ(d.logprobs[s].top[k].token_id, h.logprobs[s].top[k].token_id);
          EXPECT_NEAR(d.logprobs[s].top[k].logprob, h.logprobs[s].top[k].logprob, 1e-4);
        }
      }
      tokens += static_cast<int>(h.token_ids.size());
    }
  }
  EXPECT_GT(tokens, 300);
}

// Beam search on the GPU in fp16 against transformers' num_beams=4 goldens: the same beams in the
// same order with scores within 1e-2 (fp16 logits; the CPU fp32 test uses 1e-3).
class CudaBeam : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { FOLIO_REQUIRE_GPU(); }
};

TEST_P(CudaBeam, MatchesTransformers) {
  auto golden = read_json_file(model_path(GetParam()) + "/golden.json");
  ASSERT_TRUE(golden.ok());
  const auto& b = (*golden)["beam_search"];
  EngineConfig c;
  c.dtype = "float16";
  c.num_kv_blocks = 256;
  c.block_size = 4;
  auto e = cuda_engine(GetParam(), c);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  GenerateRequest g;
  g.prompt_token_ids = b["prompt"].get<std::vector<int32_t>>();
  g.params.use_beam_search = true;
  g.params.temperature = 0.0f;
  g.params.n = b["num_beams"].get<int>();
  g.params.max_tokens = b["max_new_tokens"].get<int>();
  g.params.ignore_eos = true;
  auto res = run_all(**e, {g});
  ASSERT_TRUE(res.outputs[0].error.ok()) << res.outputs[0].error.to_string();
  ASSERT_EQ(res.outputs[0].deltas.size(), b["sequences"].size());
  for (size_t j = 0; j < res.outputs[0].deltas.size(); ++j) {
    const auto& d = res.outputs[0].deltas[j];
    EXPECT_EQ(d.token_ids, b["sequences"][j].get<std::vector<int32_t>>()) << "beam " << j;
    const double score = d.cumulative_logprob / static_cast<double>(d.token_ids.size());
    EXPECT_NEAR(score, b["scores"][j].get<double>(), 1e-2) << "beam " << j;
  }
  EXPECT_EQ((*e)->kv().num_free_blocks(), (*e)->kv().num_total_blocks());
  EXPECT_TRUE((*e)->kv().check_invariants().ok());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaBeam, ::testing::Values("llama_hd128", "qwen3_hd64"));

// Prefix caching on the GPU: a prompt served from cached blocks gives the tokens the first
// computation gave (same greedy continuation), and the cache reports the hit.
TEST(CudaDecoding, PrefixCacheHitGivesTheSameTokens) {
  FOLIO_REQUIRE_GPU();
  EngineConfig c;
  c.dtype = "float16";
  c.num_kv_blocks = 256;
  c.block_size = 16;
  c.enable_prefix_caching = true;
  auto e = cuda_engine("qwen3_hd64", c);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  std::mt19937 rng(5);
  GenerateRequest g;
  for (int k = 0; k < 70; ++k) g.prompt_token_ids.push_back(static_cast<int32_t>(rng() % 512));
  g.params.temperature = 0.0f;
  g.params.max_tokens = 16;
  g.params.ignore_eos = true;
  g.params.logprobs = 2;
  auto first = run_all(**e, {g});
  auto second = run_all(**e, {g});
  ASSERT_TRUE(first.add_status[0].ok()) << first.add_status[0].to_string();
  ASSERT_EQ(first.outputs[0].deltas.size(), 1u);
  ASSERT_EQ(second.outputs[0].deltas.size(), 1u);
  EXPECT_EQ(second.outputs[0].num_cached_prompt_tokens, 64);  // 4 full blocks of 16
  const auto& a = first.outputs[0].deltas[0];
  const auto& b = second.outputs[0].deltas[0];
  for (size_t s = 0; s < a.token_ids.size(); ++s) {
    const auto& top = a.logprobs[s].top;
    if (top.size() < 2 || top[0].logprob - top[1].logprob < 0.05) break;
    ASSERT_EQ(b.token_ids[s], a.token_ids[s]) << "token " << s;
  }
}

}  // namespace
}  // namespace folio
