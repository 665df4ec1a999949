// K1/K2 timings (docs/performance.md) of the attention kernels, run only when
// FOLIO_CUDA_BENCH=1 (a timed unit test is not a benchmark: these print figures for the report and
// assert nothing about speed). bf16, head_dim 128, 32 q / 8 kv heads, random data, CUDA events,
// median of 20 runs after warm-up. K1 prints both decode kernels (v1, v2) for every shape, and
// v2 over an fp8 (e4m3) cache beside them: its TB/s count the fp8 bytes read (half the bf16's).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "backend/cuda/decode_attention.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/prefill_attention.h"
#include "backend/cuda/skinny_gemm.h"
#include "base/fp8.h"
#include "cuda_test_util.h"

namespace folio::cuda {
namespace {

constexpr int kHeads = 32, kKvHeads = 8, kDim = 128;

bool bench_enabled() {
  const char* e = std::getenv("FOLIO_CUDA_BENCH");
  return e && std::string(e) == "1";
}

// FOLIO_BENCH_K2_KERNELS=v3tma,v3tmaq: K2 only (no K1 shapes), those prefill kernels and v1
// (every output's cross-check), for quick A/B runs. Unset: everything.
const std::string& k2_kernel_filter() {
  static const std::string f = [] {
    const char* e = std::getenv("FOLIO_BENCH_K2_KERNELS");
    std::string list;
    if (e != nullptr) list.append(",").append(e).append(",");
    return list;
  }();
  return f;
}
bool k2_kernel_selected(PrefillKernel k) {
  std::string key(",");
  key.append(prefill_kernel_name(k)).append(",");
  return k2_kernel_filter().empty() || k == PrefillKernel::kV1 ||
         k2_kernel_filter().find(key) != std::string::npos;
}

// Fills a device buffer with random bf16 by replicating a 16 MiB random chunk.
void fill_random(void* dst, size_t bytes, std::mt19937& rng) {
  const size_t chunk = std::min<size_t>(bytes, 16u << 20);
  auto host = testing::random_vec(chunk / 2, rng);
  std::vector<uint16_t> bits(host.size());
  for (size_t i = 0; i < host.size(); ++i) bits[i] = testing::to_bits(DType::kBF16, host[i]);
  for (size_t off = 0; off < bytes; off += chunk)
    ASSERT_TRUE(
        copy(static_cast<char*>(dst) + off, bits.data(), std::min(chunk, bytes - off)).ok());
}

// Fills a device buffer with random finite e4m3 codes (values in [-1, 1]), 16 MiB replicated.
void fill_random_fp8(void* dst, size_t bytes, std::mt19937& rng) {
  const size_t chunk = std::min<size_t>(bytes, 16u << 20);
  auto host = testing::random_vec(chunk, rng);
  std::vector<uint8_t> codes(chunk);
  for (size_t i = 0; i < chunk; ++i) codes[i] = float_to_fp8_e4m3(host[i]);
  for (size_t off = 0; off < bytes; off += chunk)
    ASSERT_TRUE(
        copy(static_cast<char*>(dst) + off, codes.data(), std::min(chunk, bytes - off)).ok());
}

std::vector<float> download_bf16(const void* src, size_t n) {
  std::vector<uint16_t> bits(n);
  EXPECT_TRUE(copy(bits.data(), src, n * 2).ok());
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = testing::from_bits(DType::kBF16, bits[i]);
  return out;
}

struct Batch {
  std::vector<int32_t> qs{0}, ctx, bts{0}, bt;
  DeviceBuffer d_qs, d_ctx, d_bts, d_bt;
};

Batch make_batch(int batch, int context, int q_len, int block_size, std::mt19937& rng) {
  Batch b;
  const int per = (context + block_size - 1) / block_size;
  std::vector<int32_t> phys(static_cast<size_t>(per) * batch);
  std::iota(phys.begin(), phys.end(), 0);
  std::shuffle(phys.begin(), phys.end(), rng);
  for (int s = 0; s < batch; ++s) {
    b.qs.push_back(b.qs.back() + q_len);
    b.ctx.push_back(context);
    b.bt.insert(b.bt.end(), phys.begin() + s * per, phys.begin() + (s + 1) * per);
    b.bts.push_back(static_cast<int32_t>(b.bt.size()));
  }
  b.d_qs = testing::upload_raw(b.qs);
  b.d_ctx = testing::upload_raw(b.ctx);
  b.d_bts = testing::upload_raw(b.bts);
  b.d_bt = testing::upload_raw(b.bt);
  return b;
}

// Median over 20 runs of the events around f(). With `before` (the queued method), before() is
// enqueued ahead of each run: the GPU is busy when the start event is recorded, so the host's
// launch latency of f's kernels is not timed (as triton's do_bench and FlashInfer's benchmarks
// measure), and before() can leave L2 cold. Without it, each run starts on an idle GPU and the
// figure includes the launch latency (a few microseconds).
template <typename F>
double median_us(F&& f, const std::function<void()>& before = {}) {
  for (int i = 0; i < 3; ++i) f();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    if (before) before();
    cudaEventRecord(a);
    f();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1000.0;
}

PagedAttentionParams params(const Batch& b, int block_size, void* q, void* kc, void* vc,
                            void* out) {
  PagedAttentionParams p;
  p.dtype = DType::kBF16;
  p.num_seqs = static_cast<int>(b.ctx.size());
  p.num_heads = kHeads;
  p.num_kv_heads = kKvHeads;
  p.head_dim = kDim;
  p.block_size = block_size;
  p.scale = 1.f / std::sqrt(128.f);
  p.q = q;
  p.k_cache = kc;
  p.v_cache = vc;
  p.out = out;
  p.query_start = b.d_qs.as<int32_t>();
  p.context_lens = b.d_ctx.as<int32_t>();
  p.block_table_start = b.d_bts.as<int32_t>();
  p.block_table = b.d_bt.as<int32_t>();
  return p;
}

TEST(AttentionBench, K1DecodeAndK2Prefill) {
  FOLIO_REQUIRE_GPU();
  if (!bench_enabled()) GTEST_SKIP() << "set FOLIO_CUDA_BENCH=1 to time the attention kernels";
  auto info = device_info();
  ASSERT_TRUE(info.ok());
  std::mt19937 rng(3);
  const size_t slot_bytes = size_t{kKvHeads} * kDim * 2;
  const size_t max_tokens = size_t{128} * 8192;  // the largest case below
  auto kc = DeviceBuffer::allocate(max_tokens * slot_bytes + (64u << 10) * 0);
  auto vc = DeviceBuffer::allocate(max_tokens * slot_bytes);
  auto q = DeviceBuffer::allocate(size_t{8192} * kHeads * kDim * 2);
  auto out = DeviceBuffer::allocate(size_t{8192} * kHeads * kDim * 2);
  ASSERT_TRUE(kc.ok() && vc.ok() && q.ok() && out.ok());
  fill_random(kc->data(), kc->bytes(), rng);
  fill_random(q->data(), q->bytes(), rng);
  std::printf("device: %s, %d SMs\n", info->name.c_str(), info->num_sms);
  // The floor the K1 targets are stated against: a device-to-device copy of 1 GiB, counted as
  // bytes read + bytes written (the kernels' figure below counts the K/V bytes they read).
  const size_t copy_bytes = size_t{1} << 30;
  const double copy_us = median_us(
      [&] { (void)cudaMemcpyAsync(vc->data(), kc->data(), copy_bytes, cudaMemcpyDeviceToDevice); });
  const double copy_tbps = 2.0 * copy_bytes / copy_us / 1e6;
  std::printf("K1 copy d2d 1 GiB: %.1f us, %.2f TB/s (read + write)\n", copy_us, copy_tbps);
  // The queued method's L2 eviction: a 256 MiB GEMV read (reads leave no dirty lines to write
  // back, unlike a memset).
  auto flush_w = DeviceBuffer::allocate(size_t{16384} * 8192 * 2);
  auto flush_xy = DeviceBuffer::allocate(size_t{16384} * 2 * 2);
  ASSERT_TRUE(flush_w.ok() && flush_xy.ok());
  auto evict_l2 = [&] {
    auto* xy = static_cast<char*>(flush_xy->data());
    (void)skinny_gemm(DType::kBF16, xy, flush_w->data(), xy + 16384 * 2, 1, 16384, 8192, false,
                      nullptr);
  };
  const double copy_q_us = median_us(
      [&] { (void)cudaMemcpyAsync(vc->data(), kc->data(), copy_bytes, cudaMemcpyDeviceToDevice); },
      evict_l2);
  const double copy_q_tbps = 2.0 * copy_bytes / copy_q_us / 1e6;
  std::printf("K1 copy d2d 1 GiB, queued: %.1f us, %.2f TB/s (read + write)\n", copy_q_us,
              copy_q_tbps);
  fill_random(vc->data(), vc->bytes(), rng);  // after the copy that overwrote it
  // The fp8 caches: one byte per element.
  auto kc8 = DeviceBuffer::allocate(max_tokens * slot_bytes / 2);
  auto vc8 = DeviceBuffer::allocate(max_tokens * slot_bytes / 2);
  ASSERT_TRUE(kc8.ok() && vc8.ok());
  fill_random_fp8(kc8->data(), kc8->bytes(), rng);
  fill_random_fp8(vc8->data(), vc8->bytes(), rng);
  // K1: both decode kernels on each shape with page 16 and page 1 (token mode); for v2 also two
  // 16-byte vectors per lane instead of one (DecodePlan::lane_vectors), the CUDA-graph plan
  // (bounded by 16384 tokens: the blocks past each length return at once), and a sweep of
  // partition sizes around the planner's choice.
  struct D {
    int batch, ctx;
  };
  const std::vector<D> k1_shapes =
      k2_kernel_filter().empty() ? std::vector<D>{{1, 8192}, {32, 2048}, {128, 2048}, {128, 8192}}
                                 : std::vector<D>{};
  for (D c : k1_shapes) {
    for (int bs : {16, 1}) {
      Batch b = make_batch(c.batch, c.ctx, 1, bs, rng);
      auto p = params(b, bs, q->data(), kc->data(), vc->data(), out->data());
      const double bytes = 2.0 * c.batch * c.ctx * slot_bytes;
      PagedAttentionParams p8 = p;  // the same batch over the fp8 cache
      p8.kv_dtype = KvCacheDtype::kFp8E4m3;
      p8.k_cache = kc8->data();
      p8.v_cache = vc8->data();
      auto time_plan = [&](const DecodePlan& plan) {
        auto ws = DeviceBuffer::allocate(plan.workspace_bytes);
        EXPECT_TRUE(ws.ok());
        Status st;
        const double us = median_us([&] { st = decode_attention(p, plan, ws->data(), nullptr); });
        EXPECT_TRUE(st.ok()) << st.to_string();
        return us;
      };
      auto report = [&](const char* what, const DecodePlan& plan) {
        const double us = time_plan(plan);
        std::printf(
            "K1 decode b%d L%d page %d %s: %.1f us, %.2f TB/s = %.0f%% of copy (partition %d x "
            "%d)\n",
            c.batch, c.ctx, bs, what, us, bytes / us / 1e6, 100.0 * bytes / us / 1e6 / copy_tbps,
            plan.partition_size, plan.max_partitions);
      };
      {  // what the engine runs: the planner's own kernel and split for this page size
        auto plan = plan_decode_attention(b.ctx, kHeads, kKvHeads, kDim, info->num_sms, 0,
                                          DecodeKernel::kDefault, DecodeCacheFormat{bs, false});
        ASSERT_TRUE(plan.ok()) << plan.status().to_string();
        const double us = time_plan(*plan);
        auto ws = DeviceBuffer::allocate(plan->workspace_bytes);
        ASSERT_TRUE(ws.ok());
        const double us_q =
            median_us([&] { (void)decode_attention(p, *plan, ws->data(), nullptr); }, evict_l2);
        std::printf("K1 decode b%d L%d page %d default (%s): %.1f us = %.0f%% of copy; queued "
                    "%.1f us, %.2f TB/s = %.0f%% of queued copy (partition %d x %d)\n",
                    c.batch, c.ctx, bs, plan->kernel == DecodeKernel::kTc ? "tc" : "v2", us,
                    100.0 * bytes / us / 1e6 / copy_tbps, us_q, bytes / us_q / 1e6,
                    100.0 * bytes / us_q / 1e6 / copy_q_tbps, plan->partition_size,
                    plan->max_partitions);
      }
      for (DecodeKernel k : {DecodeKernel::kV1, DecodeKernel::kV2}) {
        auto plan = plan_decode_attention(b.ctx, kHeads, kKvHeads, kDim, info->num_sms, 0, k);
        ASSERT_TRUE(plan.ok()) << plan.status().to_string();
        report(k == DecodeKernel::kV1 ? "v1" : "v2", *plan);
        if (k == DecodeKernel::kV1) continue;
        {
          auto ws = DeviceBuffer::allocate(plan->workspace_bytes);
          ASSERT_TRUE(ws.ok());
          const double us = median_us(
              [&] { (void)decode_attention(p, *plan, ws->data(), nullptr); }, evict_l2);
          std::printf("K1 decode b%d L%d page %d v2 queued (L2 cold, launch not timed): %.1f us, "
                      "%.2f TB/s = %.0f%% of copy, %.0f%% of queued copy\n",
                      c.batch, c.ctx, bs, us, bytes / us / 1e6,
                      100.0 * bytes / us / 1e6 / copy_tbps, 100.0 * bytes / us / 1e6 / copy_q_tbps);
        }
        DecodePlan wide = *plan;
        wide.lane_vectors = 2;
        report("v2 lanes2", wide);
        for (int hc : {2, 1}) {  // fewer q heads per block than the group of 4
          DecodePlan split = *plan;
          split.head_chunk = hc;
          report(hc == 2 ? "v2 head chunk 2" : "v2 head chunk 1", split);
        }
        auto bounded = plan_decode_attention_bounded(c.batch, 16384, kHeads, kKvHeads, kDim,
                                                     info->num_sms, 0, k);
        ASSERT_TRUE(bounded.ok()) << bounded.status().to_string();
        report("v2 graph plan (bound 16384)", *bounded);
        std::string sweep;
        for (int ps = std::max(64, plan->partition_size / 4);
             ps <= std::min(16384, plan->partition_size * 4); ps *= 2) {
          if (ps == plan->partition_size || ps >= 2 * c.ctx) continue;
          auto sp = plan_decode_attention(b.ctx, kHeads, kKvHeads, kDim, info->num_sms, ps, k);
          ASSERT_TRUE(sp.ok()) << sp.status().to_string();
          char buf[64];
          std::snprintf(buf, sizeof(buf), " p%d %.1f", ps, time_plan(*sp));
          sweep += buf;
        }
        std::printf("K1 decode b%d L%d page %d v2 sweep (partition us):%s\n", c.batch, c.ctx, bs,
                    sweep.c_str());
      }
      {  // v2 over the fp8 cache, the planner's split (the same as bf16's: it depends on lengths)
        const double bytes8 = bytes / 2;
        auto plan = plan_decode_attention(b.ctx, kHeads, kKvHeads, kDim, info->num_sms, 0,
                                          DecodeKernel::kV2);
        ASSERT_TRUE(plan.ok()) << plan.status().to_string();
        auto ws = DeviceBuffer::allocate(plan->workspace_bytes);
        ASSERT_TRUE(ws.ok());
        Status st;
        const double us = median_us([&] { st = decode_attention(p8, *plan, ws->data(), nullptr); });
        EXPECT_TRUE(st.ok()) << st.to_string();
        const double us_q =
            median_us([&] { (void)decode_attention(p8, *plan, ws->data(), nullptr); }, evict_l2);
        std::printf(
            "K1 decode b%d L%d page %d v2 fp8 cache: %.1f us, %.2f TB/s = %.0f%% of copy; queued "
            "(L2 cold, launch not timed) %.1f us, %.2f TB/s = %.0f%% of queued copy (fp8 bytes "
            "read, partition %d x %d)\n",
            c.batch, c.ctx, bs, us, bytes8 / us / 1e6, 100.0 * bytes8 / us / 1e6 / copy_tbps, us_q,
            bytes8 / us_q / 1e6, 100.0 * bytes8 / us_q / 1e6 / copy_q_tbps, plan->partition_size,
            plan->max_partitions);
      }
      for (bool fp8 : {false, true}) {  // the tensor-core kernel, the planner's split and 2x / 0.5x
        const PagedAttentionParams& pt = fp8 ? p8 : p;
        const double tb = fp8 ? bytes / 2 : bytes;
        auto plan = plan_decode_attention(b.ctx, kHeads, kKvHeads, kDim, info->num_sms, 0,
                                          DecodeKernel::kTc);
        ASSERT_TRUE(plan.ok()) << plan.status().to_string();
        for (int ps : {plan->partition_size, plan->partition_size * 2, plan->partition_size / 2}) {
          if (ps < 64 || ps > 16384 || (ps != plan->partition_size && ps >= 2 * c.ctx)) continue;
          auto sp = plan_decode_attention(b.ctx, kHeads, kKvHeads, kDim, info->num_sms, ps,
                                          DecodeKernel::kTc);
          ASSERT_TRUE(sp.ok()) << sp.status().to_string();
          auto ws = DeviceBuffer::allocate(sp->workspace_bytes);
          ASSERT_TRUE(ws.ok());
          Status st;
          const double us =
              median_us([&] { st = decode_attention(pt, *sp, ws->data(), nullptr); });
          EXPECT_TRUE(st.ok()) << st.to_string();
          const double us_q =
              median_us([&] { (void)decode_attention(pt, *sp, ws->data(), nullptr); }, evict_l2);
          std::printf("K1 decode b%d L%d page %d tc%s%s: %.1f us, %.2f TB/s = %.0f%% of copy; "
                      "queued %.1f us = %.0f%% of queued copy (partition %d x %d)\n",
                      c.batch, c.ctx, bs, fp8 ? " fp8 cache" : "",
                      ps == plan->partition_size ? "" : " (partition forced)", us, tb / us / 1e6,
                      100.0 * tb / us / 1e6 / copy_tbps, us_q,
                      100.0 * tb / us_q / 1e6 / copy_q_tbps, sp->partition_size,
                      sp->max_partitions);
        }
      }
      for (bool fp8 : {false, true}) {  // tc's two forms: K/V waiting in registers or a ring
        auto plan = plan_decode_attention(b.ctx, kHeads, kKvHeads, kDim, info->num_sms, 0,
                                          DecodeKernel::kTc);
        ASSERT_TRUE(plan.ok()) << plan.status().to_string();
        auto ws = DeviceBuffer::allocate(plan->workspace_bytes);
        ASSERT_TRUE(ws.ok());
        for (int ring : {0, 2, 3}) {
          plan->tc_ring_stages = ring;
          Status st;
          const double us =
              median_us([&] { st = decode_attention(fp8 ? p8 : p, *plan, ws->data(), nullptr); });
          EXPECT_TRUE(st.ok()) << st.to_string();
          const double tb = fp8 ? bytes / 2 : bytes;
          std::printf("K1 decode b%d L%d page %d tc%s ring %d: %.1f us, %.2f TB/s = %.0f%% of copy\n",
                      c.batch, c.ctx, bs, fp8 ? " fp8 cache" : "", ring, us, tb / us / 1e6,
                      100.0 * tb / us / 1e6 / copy_tbps);
        }
      }
      for (int lanes : {2}) {  // 16 elements per lane (two 8-byte chunks): fewer shuffles/token
        auto plan = plan_decode_attention(b.ctx, kHeads, kKvHeads, kDim, info->num_sms, 0,
                                          DecodeKernel::kV2);
        ASSERT_TRUE(plan.ok()) << plan.status().to_string();
        plan->lane_vectors = lanes;
        auto ws = DeviceBuffer::allocate(plan->workspace_bytes);
        ASSERT_TRUE(ws.ok());
        const double us =
            median_us([&] { (void)decode_attention(p8, *plan, ws->data(), nullptr); });
        std::printf("K1 decode b%d L%d page %d v2 fp8 cache lanes%d: %.1f us, %.2f TB/s\n", c.batch,
                    c.ctx, bs, lanes, us, bytes / 2 / us / 1e6);
      }
    }
  }
  struct P {
    int batch, len;
  };
  // The ceiling the K2 figures are stated against: this GPU's bf16 GEMM rate (cuBLASLt, 8192^3,
  // the buffers above reused as operands: only the timing matters).
  double gemm_tflops = 0;
  {
    auto gemm = Gemm::create();
    ASSERT_TRUE(gemm.ok()) << gemm.status().to_string();
    const int n = 8192;
    ASSERT_GE(kc->bytes(), size_t{2} * 3 * n * n);
    auto* base = static_cast<char*>(kc->data());
    const void *a = base, *w = base + size_t{2} * n * n;
    void* c = base + size_t{4} * n * n;
    FOLIO_ASSERT_OK((*gemm)->matmul_nt(DType::kBF16, a, w, c, n, n, n, false, nullptr));
    const double us = median_us(
        [&] { (void)(*gemm)->matmul_nt(DType::kBF16, a, w, c, n, n, n, false, nullptr); });
    gemm_tflops = 2.0 * n * n * double(n) / us / 1e6;
    std::printf("K2 GEMM bf16 8192^3 (cuBLASLt): %.1f us, %.1f TFLOP/s\n", us, gemm_tflops);
    fill_random(kc->data(), kc->bytes(), rng);
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
