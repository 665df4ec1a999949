// CudaLlamaExecutor against the CPU reference executor on the same random bf16 checkpoint:
// mixed steps (prefill chunks after cached context, whole prompts, decodes), partial blocks,
// scattered block ids, copy-on-write copies and a swap out/in round trip, block sizes 1 and 16,
// Llama (head_dim 128, MQA-like group 4), Qwen2 (bias, tied) and Qwen3 (q/k norm), YaRN rope,
// and sliding windows (Mistral's on every layer, Qwen2's on some).
// Every step's logits must agree within bf16 accuracy. The _fp8 cases run both executors with an
// fp8 KV cache (--kv-cache-dtype fp8): the GPU stores e4m3 bytes, dequantizes them for prefill
// steps and reads them directly in decode steps; the CPU stores the same e4m3 values in fp32.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <random>

#include "backend/cuda/decode_attention.h"
#include "backend/cuda/device_memory.h"
#include "cuda_test_util.h"
#include "model/cpu_llama_executor.h"
#include "model/cuda_llama_executor.h"
#include "model/llama_weights.h"
#include "tiny_checkpoint.h"
#include "twin_runner.h"

namespace folio {
namespace {

using testing::TinyModelSpec;
using testing::TwinRunner;

struct Case {
  const char* name;
  TinyModelSpec spec;
  int block_size;
  KvCacheDtype kv_dtype = KvCacheDtype::kAuto;
  // fp8 only: the prefill scratch's size (FOLIO_FP8_SCRATCH_TOKENS) and max_model_len, its
  // floor; small values split a step's sequences into several dequantize-and-attend groups.
  const char* fp8_scratch_tokens = nullptr;
  int max_model_len = 512;
  bool whole_mixed = false;  // FOLIO_SPLIT_MIXED=0: a 16-bit cache's mixed steps in one launch
};

class CudaVsCpu : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { FOLIO_REQUIRE_GPU(); }
};

TEST_P(CudaVsCpu, MixedStepsCopiesAndSwapsMatchTheCpuExecutor) {
  const Case& c = GetParam();
  const std::string dir = testing::write_tiny_checkpoint(c.spec);
  auto config = ModelConfig::load(dir);
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  auto ck = Checkpoint::open(dir);
  ASSERT_TRUE(ck.ok()) << ck.status().to_string();
  auto weights = LlamaWeights::load(*config, *ck);
  ASSERT_TRUE(weights.ok()) << weights.status().to_string();
  const int bs = c.block_size, num_blocks = 1024 / bs, num_swap = 256 / bs;
  KvCacheShape kv;
  kv.block_size = bs;
  kv.num_blocks = num_blocks;
  kv.num_swap_blocks = num_swap;
  kv.dtype = c.kv_dtype;
  CpuLlamaExecutor cpu(*config, std::move(*weights), kv);
  CudaExecutorOptions o;
  o.block_size = bs;
  o.kv_cache_dtype = c.kv_dtype;
  o.num_blocks = num_blocks;
  o.swap_space_gib = (num_swap + 0.5) * CudaLlamaExecutor::kv_block_bytes(*config, bs, c.kv_dtype) /
                     double(1ull << 30);
  o.max_num_batched_tokens = 256;
  o.max_model_len = c.max_model_len;
  if (c.fp8_scratch_tokens) setenv("FOLIO_FP8_SCRATCH_TOKENS", c.fp8_scratch_tokens, 1);
  if (c.whole_mixed) setenv("FOLIO_SPLIT_MIXED", "0", 1);
  auto gpu = CudaLlamaExecutor::create(*config, &*ck, o);
  unsetenv("FOLIO_FP8_SCRATCH_TOKENS");
  unsetenv("FOLIO_SPLIT_MIXED");
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  ASSERT_EQ((*gpu)->kv_shape().num_blocks, num_blocks);
  ASSERT_EQ((*gpu)->kv_shape().num_swap_blocks, num_swap);
  if (c.kv_dtype == KvCacheDtype::kFp8E4m3) {  // one byte per element: half a 16-bit block
    ASSERT_EQ((*gpu)->memory_report().kv_block_bytes * 2,
              CudaLlamaExecutor::kv_block_bytes(*config, bs));
  }

  const int V = config->vocab_size;
  const double tol = 2e-2;
  TwinRunner r(**gpu, cpu, bs, num_blocks, 7);
  const int s0 = r.add(37, V), s1 = r.add(50, V), s2 = r.add(5, V);
  // Step 1: a whole prompt, a first chunk, a short prompt with every row's logits.
  EXPECT_LT(r.step({{s0, 37}, {s1, 20}, {s2, 5}}, s2), tol) << "step 1";
  r.append_token(s0, V);
  r.append_token(s2, V);
  const int s3 = r.add(17, V);
  // Step 2 (mixed): decodes, the second chunk over 20 cached tokens, a new prompt.
  EXPECT_LT(r.step({{s0, 1}, {s1, 30}, {s2, 1}, {s3, 17}}), tol) << "step 2";
  r.cow(s0);
  r.swap_round_trip(s1);
  // Steps 3-6: decode only (the decode kernel), reading the copied and swapped-in blocks.
  for (int step = 3; step <= 6; ++step) {
    for (int s : {s0, s1, s2, s3}) r.append_token(s, V);
    EXPECT_LT(r.step({{s0, 1}, {s1, 1}, {s2, 1}, {s3, 1}}), tol) << "step " << step;
  }
  // A prefill chunk next to decodes after the copies (the prefill kernel over copied blocks).
  for (int s : {s0, s1}) r.append_token(s, V);
  const int s4 = r.add(40, V);
  EXPECT_LT(r.step({{s0, 1}, {s4, 40}, {s1, 1}}, s4), tol) << "step 7";
}

TinyModelSpec spec(const char* arch, int heads, int kv_heads, int head_dim, bool tied) {
  TinyModelSpec s;
  s.architecture = arch;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.head_dim = head_dim;
  s.tied = tied;
  return s;
}

// YaRN over an original context of 64 positions: dimensions 0-8 ramp, the rest interpolate, and
// every logit scales by 1.1386^2 (the kernels must take the executor's scale, not 1/sqrt(hd)).
TinyModelSpec yarn(TinyModelSpec s) {
  s.config_keys["rope_scaling"] = {
      {"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 64}};
  return s;
}

// A window of 24 (max_model_len 512 past it: the executor runs the windowed kernels): the step
// sequence's contexts of 37-52 tokens outgrow it, those of 5-22 do not. Qwen2 slides layer 1 only.
TinyModelSpec windowed(TinyModelSpec s) {
  s.config_keys["sliding_window"] = 24;
  if (s.architecture == "Qwen2ForCausalLM") {
    s.config_keys["use_sliding_window"] = true;
    s.config_keys["max_window_layers"] = 1;
  }
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    Models, CudaVsCpu,
    ::testing::Values(
        Case{"llama_hd128_bs16", spec("LlamaForCausalLM", 4, 1, 128, false), 16},
        Case{"llama_hd128_bs1", spec("LlamaForCausalLM", 4, 1, 128, false), 1},
        Case{"qwen2_bias_bs16", spec("Qwen2ForCausalLM", 4, 2, 64, true), 16},
        Case{"qwen3_qknorm_bs1", spec("Qwen3ForCausalLM", 8, 2, 64, false), 1},
        Case{"qwen3_qknorm_bs16", spec("Qwen3ForCausalLM", 8, 2, 64, false), 16},
        Case{"llama_hd128_bs16_whole_mixed", spec("LlamaForCausalLM", 4, 1, 128, false), 16,
             KvCacheDtype::kAuto, nullptr, 512, true},
        Case{"llama_hd128_bs16_fp8", spec("LlamaForCausalLM", 4, 1, 128, false), 16,
             KvCacheDtype::kFp8E4m3},
        Case{"llama_hd128_bs1_fp8", spec("LlamaForCausalLM", 4, 1, 128, false), 1,
             KvCacheDtype::kFp8E4m3},
        // Scratch of 64 tokens (4 blocks): step 1 runs as groups {s0}, {s1, s2}.
        Case{"llama_hd128_bs16_fp8_groups", spec("LlamaForCausalLM", 4, 1, 128, false), 16,
             KvCacheDtype::kFp8E4m3, "1", 64},
        Case{"qwen3_qknorm_bs16_fp8", spec("Qwen3ForCausalLM", 8, 2, 64, false), 16,
             KvCacheDtype::kFp8E4m3},
        Case{"llama_hd128_yarn_bs16", yarn(spec("LlamaForCausalLM", 4, 1, 128, false)), 16},
        Case{"qwen3_yarn_bs1", yarn(spec("Qwen3ForCausalLM", 8, 2, 64, false)), 1},
        Case{"mistral_window_bs16", windowed(spec("MistralForCausalLM", 4, 1, 128, false)), 16},
        Case{"mistral_window_bs1", windowed(spec("MistralForCausalLM", 4, 1, 128, false)), 1},
        Case{"mistral_window_bs16_fp8", windowed(spec("MistralForCausalLM", 4, 1, 128, false)), 16,
             KvCacheDtype::kFp8E4m3},
        Case{"qwen2_window_layer1_bs16", windowed(spec("Qwen2ForCausalLM", 4, 2, 64, true)), 16}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

// A batch-1 alternative switched on by `env_var`=1 (read when the executor is created) against
// the default launches, on a model wide enough for it (hidden 1024: the fused norm's range;
// inter 2816: a last flow segment of 768): every batch-1 decode step's logits must be the same
// bits, eager and replayed from a CUDA graph.
void expect_same_batch_one_logits(const char* env_var) {
  TinyModelSpec s = spec("LlamaForCausalLM", 8, 2, 128, false);
  s.hidden = 1024;
  s.inter = 2816;
  const std::string dir = testing::write_tiny_checkpoint(s);
  auto config = ModelConfig::load(dir);
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  auto ck = Checkpoint::open(dir);
  ASSERT_TRUE(ck.ok()) << ck.status().to_string();
  CudaExecutorOptions o;
  o.block_size = 16;
  o.num_blocks = 64;
  o.max_num_batched_tokens = 256;
  o.max_model_len = 512;
  setenv(env_var, "1", 1);
  auto on = CudaLlamaExecutor::create(*config, &*ck, o);
  setenv(env_var, "0", 1);
  auto off = CudaLlamaExecutor::create(*config, &*ck, o);
  unsetenv(env_var);
  ASSERT_TRUE(on.ok()) << on.status().to_string();
  ASSERT_TRUE(off.ok()) << off.status().to_string();
  const int V = config->vocab_size;
  TwinRunner r(**on, **off, o.block_size, o.num_blocks, 3);
  const int s0 = r.add(29, V);
  EXPECT_EQ(r.step({{s0, 29}}), 0.0) << "prefill (not batch 1: the same kernels)";
  for (int step = 0; step < 6; ++step) {
    r.append_token(s0, V);
    EXPECT_EQ(r.step({{s0, 1}}), 0.0) << "decode step " << step;
  }
  EXPECT_GT((*on)->graph_steps(), 0) << "some decode steps should replay a CUDA graph";
}

// FOLIO_DECODE_MLP=1: o_proj .. down in one persistent launch (decode_mlp.h).
TEST(CudaDecodeMlp, BatchOneDecodeStepsGiveTheSameLogits) {
  FOLIO_REQUIRE_GPU();
  expect_same_batch_one_logits("FOLIO_DECODE_MLP");
}

// FOLIO_SKINNY_FLOW=1: down waits per segment of gate_up's output (skinny_gemm.h, SkinnyFlow).
TEST(CudaSkinnyFlow, BatchOneDecodeStepsGiveTheSameLogits) {
  FOLIO_REQUIRE_GPU();
  expect_same_batch_one_logits("FOLIO_SKINNY_FLOW");
}

// tc's wave split inside CUDA graphs (DecodePlan::step_split): a bucket just past one resident
// wave keeps two graphs, split and unsplit, and each step's lengths pick one. 36 sequences (bucket
// 40) of 8 kv heads make 288 tc blocks, past one wave of 2 x 132 SMs: decode steps over 36 long
// contexts split, steps where 6 of them are short do not. Where a 16-bit cache runs tc's
// fragment ring (fast DRAM: 3 blocks per SM, never split) the test takes an fp8 cache, whose
// register form runs 3 per SM: 51 sequences (bucket 56, 408 blocks), 7 of them short in the
// steps that do not split. Graph replays against eager steps (which split by the same planner):
// the logits agree on both kinds of step.
TEST(CudaGraphWaveSplit, SplitAndUnsplitStepsMatchEagerSteps) {
  FOLIO_REQUIRE_GPU();
  unsetenv("FOLIO_DECODE_KERNEL");
  TinyModelSpec s = spec("LlamaForCausalLM", 8, 8, 128, false);
  const std::string dir = testing::write_tiny_checkpoint(s);
  auto config = ModelConfig::load(dir);
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  auto ck = Checkpoint::open(dir);
  ASSERT_TRUE(ck.ok()) << ck.status().to_string();
  auto info = cuda::device_info();
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  struct Setup {
    KvCacheDtype kv;
    int bucket, num_long, num_short;  // num_long a multiple of 3 (prefilled 3 a step)
  };
  const int long_len = 2100;
  CudaExecutorOptions o;
  o.block_size = 16;
  o.max_num_batched_tokens = 8192;
  o.max_model_len = 4096;
  Setup su{KvCacheDtype::kAuto, 40, 36, 6};
  auto format_of = [&](const Setup& x) {
    return cuda::DecodeCacheFormat{16, x.kv == KvCacheDtype::kFp8E4m3, info->peak_memory_gbps};
  };
  auto plan_bucket = [&](const Setup& x) {
    return cuda::plan_decode_attention_bounded(x.bucket, o.max_model_len, 8, 8, 128, info->num_sms,
                                               0, cuda::DecodeKernel::kDefault, format_of(x));
  };
  auto graph_plan = plan_bucket(su);
  ASSERT_TRUE(graph_plan.ok()) << graph_plan.status().to_string();
  if (!graph_plan->step_split) {
    su = Setup{KvCacheDtype::kFp8E4m3, 56, 51, 7};
    graph_plan = plan_bucket(su);
    ASSERT_TRUE(graph_plan.ok()) << graph_plan.status().to_string();
  }
  if (!graph_plan->step_split) GTEST_SKIP() << "no bucket just past one wave on this GPU";
  const cuda::DecodeCacheFormat cache = format_of(su);
  const int num_long = su.num_long, num_short = su.num_short;
  o.kv_cache_dtype = su.kv;
  o.num_blocks = (num_long * (long_len + 16) + num_short * 128) / 16 + 16;
  auto graphs = CudaLlamaExecutor::create(*config, &*ck, o);
  o.cuda_graphs = false;
  auto eager = CudaLlamaExecutor::create(*config, &*ck, o);
  ASSERT_TRUE(graphs.ok()) << graphs.status().to_string();
  ASSERT_TRUE(eager.ok()) << eager.status().to_string();
  const int V = config->vocab_size;
  TwinRunner r(**graphs, **eager, o.block_size, o.num_blocks, 11);
  std::vector<int> all_long, mixed;
  for (int i = 0; i < num_long; i += 3) {  // prefill, 3 prompts a step
    std::vector<std::pair<int, int>> work;
    for (int j = i; j < i + 3; ++j) work.push_back({r.add(long_len, V), long_len});
    EXPECT_LT(r.step(work), 2e-2) << "prefill " << i;
    for (auto [id, n] : work) all_long.push_back(id);
  }
  mixed.assign(all_long.begin(), all_long.begin() + (num_long - num_short));
  std::vector<std::pair<int, int>> short_work;
  for (int i = 0; i < num_short; ++i) short_work.push_back({r.add(100, V), 100});
  EXPECT_LT(r.step(short_work), 2e-2) << "short prefill";
  for (auto [id, n] : short_work) mixed.push_back(id);
  // Which graph each kind of step takes: the split size of its lengths (0: unsplit).
  auto lens_of = [&](const std::vector<int>& ids) {
    std::vector<int32_t> lens;
    for (int id : ids) lens.push_back(static_cast<int32_t>(r.pending(id) + r.computed(id)));
    return lens;
  };
  for (int step = 0; step < 6; ++step) {
    const std::vector<int>& ids = step % 2 == 0 ? all_long : mixed;
    for (int id : ids) r.append_token(id, V);
    const int split = cuda::decode_step_partition(*graph_plan, lens_of(ids), info->num_sms, cache);
    EXPECT_EQ(split > 0, step % 2 == 0) << "step " << step << " split " << split;
    std::vector<std::pair<int, int>> work;
    for (int id : ids) work.push_back({id, 1});
    EXPECT_LT(r.step(work), 2e-2) << "decode step " << step << " (split " << split << ")";
  }
  EXPECT_GE((*graphs)->graph_steps(), 4) << "both graphs of bucket 40 should have replayed";
  // Both were captured when the executor was created (warm_up_graphs), none on first use.
  EXPECT_EQ((*graphs)->graph_captures(), 0);
}

}  // namespace
}  // namespace folio
