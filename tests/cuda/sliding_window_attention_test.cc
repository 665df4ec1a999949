// Sliding-window attention on the GPU against the CPU reference (cpu::paged_attention with the
// same window): decode on kernels v2 and tc (head_dim 128; 16-bit and fp8 caches, block sizes 16
// and 1, plans over the windowed lengths, over the whole lengths, and split into small
// partitions, which start mid-page) and prefill, which
// runs v2x2 whatever its plan says, v2 where it says kV2 (chunks after cached context, rows whose
// windows skip whole key tiles). A window wider than every context must give the unwindowed
// result, and a decode plan on kernel v1 must be refused rather than attend wrongly.
#include <gtest/gtest.h>

#include <random>

#include "attention_test_util.h"
#include "backend/cuda/prefill_attention.h"

namespace folio::cuda {
namespace {

using testing::AttentionProblem;
using testing::SeqSpec;

struct WindowCase {
  int block_size;
  KvCacheDtype kv;
  int head_dim;
};

class SlidingWindowTest : public ::testing::TestWithParam<WindowCase> {
 protected:
  void SetUp() override { FOLIO_REQUIRE_GPU(); }
};

std::vector<int32_t> clamped(const std::vector<int32_t>& lens, int w) {
  std::vector<int32_t> out(lens);
  for (int32_t& l : out) l = std::min(l, w);
  return out;
}

TEST_P(SlidingWindowTest, DecodeMatchesTheReference) {
  const WindowCase& c = GetParam();
  std::mt19937 rng(5 + c.block_size + c.head_dim);
  // tc takes 8 q heads per KV head at head_dim 128: 16 q heads over 2 KV heads.
  AttentionProblem prob(DType::kBF16, 16, 2, c.head_dim, c.block_size,
                        {{300, 1}, {37, 1}, {5, 1}, {129, 1}, {1000, 1}, {16, 1}, {17, 1}}, rng,
                        c.kv);
  for (DecodeKernel k : {DecodeKernel::kV2, DecodeKernel::kTc}) {
    if (k == DecodeKernel::kTc && c.head_dim != 128) continue;
    for (int w : {1, 16, 17, 37, 100, 513}) {
      prob.set_sliding_window(w);
      for (int variant = 0; variant < 3; ++variant) {
        // 0: the executor's plan (lengths clamped to the window); 1: over the whole lengths (more
        // partitions than the window needs return at once); 2: partitions of 64 (splits that
        // start mid-page and merge).
        auto plan =
            plan_decode_attention(variant == 1 ? prob.context_lens : clamped(prob.context_lens, w),
                                  16, 2, c.head_dim, 132, variant == 2 ? 64 : 0, k);
        ASSERT_TRUE(plan.ok()) << plan.status().to_string();
        auto ws = DeviceBuffer::allocate(plan->workspace_bytes);
        ASSERT_TRUE(ws.ok());
        prob.dout.poison();
        FOLIO_ASSERT_OK(decode_attention(prob.params(), *plan, ws->data(), nullptr));
        FOLIO_ASSERT_OK(synchronize());
        EXPECT_LT(prob.error(), testing::attention_tol(prob.dt))
            << (k == DecodeKernel::kTc ? "tc" : "v2") << " window " << w << " plan " << variant
            << ": " << plan->partition_size << " x " << plan->max_partitions;
      }
    }
  }
  // The window's result is not the whole context's.
  prob.set_sliding_window(0);
  const std::vector<float> full = prob.ref;
  prob.set_sliding_window(100);
  EXPECT_GT(testing::rel_error(full, prob.ref), 0.05);
}

TEST_P(SlidingWindowTest, PrefillMatchesTheReferenceWhateverThePlanSays) {
  const WindowCase& c = GetParam();
  if (c.kv != KvCacheDtype::kAuto) GTEST_SKIP() << "prefill reads a 16-bit cache";
  std::mt19937 rng(9 + c.block_size + c.head_dim);
  // Whole prompts, a chunk of 70 after 130 cached tokens, a decode row beside them.
  AttentionProblem prob(DType::kBF16, 8, 2, c.head_dim, c.block_size,
                        {{300, 300}, {200, 70}, {50, 50}, {90, 1}, {257, 129}}, rng);
  for (int w : {1, 16, 64, 65, 100, 1000}) {
    prob.set_sliding_window(w);
    for (PrefillKernel k : {PrefillKernel::kV3tmaq, PrefillKernel::kV2, PrefillKernel::kV2x2}) {
      auto plan = plan_prefill_attention(prob.query_start, 8, 2);
      ASSERT_TRUE(plan.ok());
      plan->kernel = k;
      prob.dout.poison();
      FOLIO_ASSERT_OK(prefill_attention(prob.params(), *plan, nullptr));
      FOLIO_ASSERT_OK(synchronize());
      EXPECT_LT(prob.error(), testing::attention_tol(prob.dt))
          << "window " << w << " plan kernel " << prefill_kernel_name(k);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Caches, SlidingWindowTest,
                         ::testing::Values(WindowCase{16, KvCacheDtype::kAuto, 128},
                                           WindowCase{1, KvCacheDtype::kAuto, 128},
                                           WindowCase{16, KvCacheDtype::kAuto, 64},
                                           WindowCase{16, KvCacheDtype::kFp8E4m3, 128},
                                           WindowCase{1, KvCacheDtype::kFp8E4m3, 128}),
                         [](const ::testing::TestParamInfo<WindowCase>& i) {
                           return "bs" + std::to_string(i.param.block_size) + "_hd" +
                                  std::to_string(i.param.head_dim) +
                                  (i.param.kv == KvCacheDtype::kFp8E4m3 ? "_fp8" : "");
                         });

TEST(SlidingWindowPlan, DecodeRefusesAWindowOnKernelV1) {
  FOLIO_REQUIRE_GPU();
  std::mt19937 rng(3);
  AttentionProblem prob(DType::kBF16, 32, 8, 128, 16, {{300, 1}, {40, 1}}, rng);
  prob.set_sliding_window(64);
  auto plan = plan_decode_attention(prob.context_lens, 32, 8, 128, 132, 0, DecodeKernel::kV1);
  ASSERT_TRUE(plan.ok());
  auto ws = DeviceBuffer::allocate(plan->workspace_bytes);
  ASSERT_TRUE(ws.ok());
  const Status st = decode_attention(prob.params(), *plan, ws->data(), nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("sliding window runs on a kernel v2 or tc plan"), std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace folio::cuda
