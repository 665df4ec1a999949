// K2 timings (docs/performance.md) of the prefill attention kernels, run only when
// FOLIO_CUDA_BENCH=1 (figures for the report; nothing asserted about speed): causal prefill over
// a paged cache (block 16), bf16, head_dim 128, 32 q / 8 kv heads, random data, every prefill
// variant (or those FOLIO_BENCH_K2_KERNELS names) per launch and queued, each cross-checked
// against v1, and v3tmaq's host time per call. Helpers: attention_bench_util.h.
#include <chrono>

#include "attention_bench_util.h"
#include "backend/cuda/gemm.h"

namespace folio::cuda {
namespace {

using namespace attention_bench;  // NOLINT: the benchmarks' own helpers

TEST(AttentionBench, K2Prefill) {
  FOLIO_REQUIRE_GPU();
  if (!bench_enabled()) GTEST_SKIP() << "set FOLIO_CUDA_BENCH=1 to time the attention kernels";
  auto info = device_info();
  ASSERT_TRUE(info.ok());
  std::printf("device: %s, %d SMs\n", info->name.c_str(), info->num_sms);
  std::mt19937 rng(5);
  // The largest shape's tokens: 8192 rows of q and out, and 8192 cache slots (one block table of
  // 512 pages of 16).
  const size_t tokens = 8192;
  AttentionBuffers buf(tokens, tokens);
  ASSERT_TRUE(buf.ok());
  buf.fill(rng);
  auto &kc = buf.kc, &vc = buf.vc, &q = buf.q, &out = buf.out;
  const L2Evictor evictor;
  ASSERT_TRUE(evictor.ok());
  const std::function<void()> evict_l2 = evictor.before();
  struct P {
    int batch, len;
  };
  // The ceiling the K2 figures are stated against: this GPU's bf16 GEMM rate (cuBLASLt, 8192^3,
  // random operands: only the timing matters).
  double gemm_tflops = 0;
  {
    auto gemm = Gemm::create();
    ASSERT_TRUE(gemm.ok()) << gemm.status().to_string();
    const int n = 8192;
    auto operands = DeviceBuffer::allocate(size_t{2} * 3 * n * n);
    ASSERT_TRUE(operands.ok());
    fill_random(operands->data(), operands->bytes(), rng);
    auto* base = static_cast<char*>(operands->data());
    const void *a = base, *w = base + size_t{2} * n * n;
    void* c = base + size_t{4} * n * n;
    FOLIO_ASSERT_OK((*gemm)->matmul_nt(DType::kBF16, a, w, c, n, n, n, false, nullptr));
    const double us = median_us(
        [&] { (void)(*gemm)->matmul_nt(DType::kBF16, a, w, c, n, n, n, false, nullptr); });
    gemm_tflops = 2.0 * n * n * double(n) / us / 1e6;
    std::printf("K2 GEMM bf16 8192^3 (cuBLASLt): %.1f us, %.1f TFLOP/s\n", us, gemm_tflops);
  }
  for (P c : {P{64, 128}, P{8, 1024}, P{4, 2048}, P{2, 4096}, P{1, 8192}}) {
    Batch b = make_batch(c.batch, c.len, c.len, 16, rng);
    auto plan = plan_prefill_attention(b.qs, kHeads, kKvHeads);
    ASSERT_TRUE(plan.ok());
    auto p = params(b, 16, q->data(), kc->data(), vc->data(), out->data());
    // Causal FLOP count: 4 * len^2 * head_dim * heads / 2 per sequence (Q·K^T and P·V over the
    // lower triangle, as FlashAttention's benchmarks count it).
    const double flops = 4.0 * c.batch * c.len * c.len * kDim * kHeads / 2;
    // Each variant's output is compared with v1's (a cross-check at the benchmark's shapes).
    const size_t out_elems = static_cast<size_t>(b.qs.back()) * kHeads * kDim;
    std::vector<float> v1_out;
    for (PrefillKernel k :
         {PrefillKernel::kV1, PrefillKernel::kV2, PrefillKernel::kV2x2, PrefillKernel::kV3,
          PrefillKernel::kV3p, PrefillKernel::kV3pq, PrefillKernel::kV3n128, PrefillKernel::kV3pw,
          PrefillKernel::kV3pwpp, PrefillKernel::kV3tma, PrefillKernel::kV3tmap,
          PrefillKernel::kV3tmapp, PrefillKernel::kV3tmaq}) {
      if (!k2_kernel_selected(k)) continue;
      plan->kernel = k;
      FOLIO_ASSERT_OK(prefill_attention(p, *plan, nullptr));
      std::vector<float> got = download_bf16(out->data(), out_elems);
      if (v1_out.empty()) v1_out = got;
      const double us = median_us([&] { (void)prefill_attention(p, *plan, nullptr); });
      // Queued as K1's: the L2 eviction keeps the GPU busy while the host encodes the tensor
      // maps and submits the kernel, so the events bracket the kernel alone (the first figure
      // also times that submission, a few us of an idle GPU, as a one-off eager launch does).
      const double us_q =
          median_us([&] { (void)prefill_attention(p, *plan, nullptr); }, evict_l2);
      std::printf(
          "K2 prefill %dx%d %-7s: %.1f us, %.1f TFLOP/s (causal FLOPs) = %.0f%% of GEMM, "
          "rel err vs v1 %.2e; queued (L2 cold, launch not timed) %.1f us, %.1f TFLOP/s\n",
          c.batch, c.len, prefill_kernel_name(k), us, flops / us / 1e6,
          100.0 * flops / us / 1e6 / gemm_tflops, testing::rel_error(got, v1_out), us_q,
          flops / us_q / 1e6);
      if (k != PrefillKernel::kV3tmaq) continue;
      // The host's share of a call (planning done: argument checks, tensor maps, the launch),
      // timed while the GPU is busy with the eviction, so the launch queue never blocks.
      evict_l2();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 10; ++i) (void)prefill_attention(p, *plan, nullptr);
      const double host_us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
          10;
      FOLIO_ASSERT_OK(synchronize());
      std::printf("K2 prefill %dx%d %-7s host: %.1f us per call\n", c.batch, c.len,
                  prefill_kernel_name(k), host_us);
    }
  }
  FOLIO_ASSERT_OK(synchronize());
}

}  // namespace
}  // namespace folio::cuda
