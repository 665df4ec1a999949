// Sliding windows in the CUDA executor against the CPU reference, over contexts many times the
// window (24): decode plans cover the lengths clamped to the window only where every layer slides
// it (Mistral: kernel tc by default since session 57, or v2); a model whose other layers attend
// to everything (Qwen2 sliding from layer 1) plans over the whole lengths, or its full layers'
// partitions would stop at the window's split. Every step's logits must agree within bf16
// accuracy, eager and from CUDA graphs.
#include <cstdlib>

#include "model/cpu_llama_executor.h"
#include "model/cuda_llama_executor.h"
#include "model/llama_weights.h"
#include "tiny_checkpoint.h"
#include "twin_runner.h"

namespace folio {
namespace {

struct WindowCase {
  const char* name;
  const char* architecture;
  int block_size;
  const char* decode_kernel;  // FOLIO_DECODE_KERNEL (nullptr: the planner's default)
};

class CudaWindowVsCpu : public ::testing::TestWithParam<WindowCase> {
 protected:
  void SetUp() override { FOLIO_REQUIRE_GPU(); }
};

TEST_P(CudaWindowVsCpu, LongContextsMatchTheCpuExecutor) {
  const WindowCase& c = GetParam();
  testing::TinyModelSpec spec;
  spec.architecture = c.architecture;
  spec.heads = 8;
  spec.kv_heads = 1;
  spec.head_dim = 128;
  spec.config_keys["sliding_window"] = 24;
  if (spec.architecture == "Qwen2ForCausalLM") {
    spec.config_keys["use_sliding_window"] = true;
    spec.config_keys["max_window_layers"] = 1;
  }
  const std::string dir = testing::write_tiny_checkpoint(spec);
  auto config = ModelConfig::load(dir);
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  auto ck = Checkpoint::open(dir);
  ASSERT_TRUE(ck.ok()) << ck.status().to_string();
  auto weights = LlamaWeights::load(*config, *ck);
  ASSERT_TRUE(weights.ok()) << weights.status().to_string();
  const int bs = c.block_size, num_blocks = 4096 / bs;  // the runner never frees a block
  KvCacheShape kv;
  kv.block_size = bs;
  kv.num_blocks = num_blocks;
  CpuLlamaExecutor cpu(*config, std::move(*weights), kv);
  CudaExecutorOptions o;
  o.block_size = bs;
  o.num_blocks = num_blocks;
  o.max_num_batched_tokens = 256;
  o.max_model_len = 2048;
  if (c.decode_kernel) setenv("FOLIO_DECODE_KERNEL", c.decode_kernel, 1);
  auto gpu = CudaLlamaExecutor::create(*config, &*ck, o);
  unsetenv("FOLIO_DECODE_KERNEL");
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();

  const int V = config->vocab_size;
  const double tol = 2e-2;
  testing::TwinRunner r(**gpu, cpu, bs, num_blocks, 11);
  const int s0 = r.add(700, V), s1 = r.add(230, V), s2 = r.add(1100, V);
  // Prompts in chunks, at most 256 tokens a step, then decodes of all three.
  for (int step = 1; r.pending(s0) + r.pending(s1) + r.pending(s2) > 0; ++step) {
    std::vector<std::pair<int, int>> work;
    int budget = 256;
    for (int s : {s0, s1, s2}) {
      const int n = std::min(r.pending(s), budget);
      if (n > 0) work.push_back({s, n});
      budget -= n;
    }
    EXPECT_LT(r.step(work), tol) << "prefill step " << step;
  }
  for (int d = 0; d < 6; ++d) {
    for (int s : {s0, s1, s2}) r.append_token(s, V);
    EXPECT_LT(r.step({{s0, 1}, {s1, 1}, {s2, 1}}), tol) << "decode step " << d;
  }
  EXPECT_GT((*gpu)->graph_steps(), 0) << "some decode steps should replay a CUDA graph";
}

INSTANTIATE_TEST_SUITE_P(
    Models, CudaWindowVsCpu,
    ::testing::Values(WindowCase{"mistral_bs16", "MistralForCausalLM", 16, nullptr},
                      WindowCase{"mistral_bs1", "MistralForCausalLM", 1, nullptr},
                      WindowCase{"mistral_bs16_v2", "MistralForCausalLM", 16, "v2"},
                      WindowCase{"qwen2_layer1_bs16", "Qwen2ForCausalLM", 16, nullptr}),
    [](const ::testing::TestParamInfo<WindowCase>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace folio
