// K1 timings (docs/performance.md) of the decode attention kernels, run only when
// FOLIO_CUDA_BENCH=1 (a timed unit test is not a benchmark: these print figures for the report and
// assert nothing about speed). bf16, head_dim 128, 32 q / 8 kv heads, random data, CUDA events,
// median of 20 runs after warm-up. K1 prints both decode kernels (v1, v2) for every shape, and
// v2 over an fp8 (e4m3) cache beside them: its TB/s count the fp8 bytes read (half the bf16's).
// K2 (prefill) is in prefill_bench_test.cc; the shared helpers in attention_bench_util.h.
#include "attention_bench_util.h"

namespace folio::cuda {
namespace {

using namespace attention_bench;  // NOLINT: the benchmarks' own helpers

TEST(AttentionBench, K1Decode) {
  FOLIO_REQUIRE_GPU();
  if (!bench_enabled()) GTEST_SKIP() << "set FOLIO_CUDA_BENCH=1 to time the attention kernels";
  if (!k2_kernel_filter().empty()) GTEST_SKIP() << "FOLIO_BENCH_K2_KERNELS is set: K2 only";
  auto info = device_info();
  ASSERT_TRUE(info.ok());
  std::mt19937 rng(3);
  const size_t slot_bytes = size_t{kKvHeads} * kDim * 2;
  const size_t max_tokens = size_t{128} * 8192;  // the largest case below
  AttentionBuffers buf(max_tokens, 8192);
  ASSERT_TRUE(buf.ok());
  auto &kc = buf.kc, &vc = buf.vc, &q = buf.q, &out = buf.out;
  fill_random(kc->data(), kc->bytes(), rng);
  fill_random(q->data(), q->bytes(), rng);
  std::printf("device: %s, %d SMs\n", info->name.c_str(), info->num_sms);
  // The floor the K1 targets are stated against: a device-to-device copy of 1 GiB, counted as
  // bytes read + bytes written (the kernels' figure below counts the K/V bytes they read).
  const CopyRate copy = copy_rate_1gib(vc->data(), kc->data());
  const double copy_tbps = copy.tbps;
  std::printf("K1 copy d2d 1 GiB: %.1f us, %.2f TB/s (read + write)\n", copy.us, copy_tbps);
  const L2Evictor evictor;
  ASSERT_TRUE(evictor.ok());
  const std::function<void()> evict_l2 = evictor.before();
  const CopyRate copy_q = copy_rate_1gib(vc->data(), kc->data(), evict_l2);
  const double copy_q_tbps = copy_q.tbps;
  std::printf("K1 copy d2d 1 GiB, queued: %.1f us, %.2f TB/s (read + write)\n", copy_q.us,
              copy_q_tbps);
  fill_random(vc->data(), vc->bytes(), rng);  // after the copy that overwrote it
  // The fp8 caches: one byte per element.
  auto kc8 = DeviceBuffer::allocate(max_tokens * slot_bytes / 2);
  auto vc8 = DeviceBuffer::allocate(max_tokens * slot_bytes / 2);
  ASSERT_TRUE(kc8.ok() && vc8.ok());
  fill_random_fp8(kc8->data(), kc8->bytes(), rng);
  fill_random_fp8(vc8->data(), vc8->bytes(), rng);
  // K1: both decode kernels on each shape (k1_shapes: the unless FOLIO_BENCH_K1_SHAPES)
  // with page 16 and page 1, token mode (k1_pages, FOLIO_BENCH_K1_PAGES); for v2 also two
  // 16-byte vectors per lane instead of one (DecodePlan::lane_vectors), the CUDA-graph plan
  // (bounded by 16384 tokens: the blocks past each length return at once), and a sweep of
  // partition sizes around the planner's choice. FOLIO_BENCH_K1_TC16=1 keeps only the default
  // plan and tc's forms over the 16-bit cache (a sweep of many shapes in one device call).
  const char* tc16_env = std::getenv("FOLIO_BENCH_K1_TC16");
  const bool tc16_only = tc16_env != nullptr && std::string(tc16_env) == "1";
  for (K1Shape c : k1_shapes()) {
    for (int bs : k1_pages()) {
      if (static_cast<size_t>(c.batch) * ((c.ctx + bs - 1) / bs) * bs > max_tokens) {
        std::printf("K1 decode b%d L%d page %d: skipped (pages past the buffers)\n", c.batch, c.ctx,
                    bs);
        continue;
      }
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
                                          DecodeKernel::kDefault,
                                          DecodeCacheFormat{bs, false, info->peak_memory_gbps});
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
        if (tc16_only) break;
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
      if (!tc16_only) {  // v2 over the fp8 cache, the planner's split (as bf16's: by lengths)
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
      // The tensor-core kernel, the planner's split (for this cache: tc's wave split counts fp8's
      // 3 blocks per SM) and 2x / 0.5x.
      for (bool fp8 : {false, true}) {
        if (fp8 && tc16_only) break;
        const PagedAttentionParams& pt = fp8 ? p8 : p;
        const double tb = fp8 ? bytes / 2 : bytes;
        auto plan = plan_decode_attention(b.ctx, kHeads, kKvHeads, kDim, info->num_sms, 0,
                                          DecodeKernel::kTc,
                                          DecodeCacheFormat{bs, fp8, info->peak_memory_gbps});
        ASSERT_TRUE(plan.ok()) << plan.status().to_string();
        for (int ps : {plan->partition_size, plan->partition_size * 2, plan->partition_size / 2}) {
          if (ps < 64 || ps > 16384 || (ps != plan->partition_size && ps >= 2 * c.ctx)) continue;
          auto sp = plan_decode_attention(b.ctx, kHeads, kKvHeads, kDim, info->num_sms, ps,
                                          DecodeKernel::kTc,
                                          DecodeCacheFormat{bs, fp8, info->peak_memory_gbps});
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
        if (fp8 && tc16_only) break;
        auto plan = plan_decode_attention(b.ctx, kHeads, kKvHeads, kDim, info->num_sms, 0,
                                          DecodeKernel::kTc,
                                          DecodeCacheFormat{bs, fp8, info->peak_memory_gbps});
        ASSERT_TRUE(plan.ok()) << plan.status().to_string();
        auto ws = DeviceBuffer::allocate(plan->workspace_bytes);
        ASSERT_TRUE(ws.ok());
        // fill: DecodePlan::tc_ring_bulk (0 cp.async, 1 bulk rows, 2 bulk rows as fragments).
        struct Form {
          int ring, fill;
        };
        for (Form f : {Form{0, 0}, Form{2, 0}, Form{3, 0}, Form{2, 1}, Form{3, 1}, Form{4, 1},
                       Form{2, 2}, Form{3, 2}}) {
          if (fp8 && f.fill == 2) continue;  // an fp8 cache reads bulk rows as pieces (fill 1)
          plan->tc_ring_stages = f.ring;
          plan->tc_ring_bulk = f.fill;
          Status st;
          auto run = [&] { st = decode_attention(fp8 ? p8 : p, *plan, ws->data(), nullptr); };
          const double us = median_us(run), us_q = median_us(run, evict_l2);
          EXPECT_TRUE(st.ok()) << st.to_string();
          const double tb = fp8 ? bytes / 2 : bytes;
          std::printf("K1 decode b%d L%d page %d tc%s ring %d%s: %.1f us, %.2f TB/s = %.0f%% of "
                      "copy; queued %.1f us = %.0f%% of queued copy\n",
                      c.batch, c.ctx, bs, fp8 ? " fp8 cache" : "", plan->tc_ring_stages,
                      f.fill == 1 ? " bulk rows" : f.fill == 2 ? " bulk frags" : "", us, tb / us / 1e6,
                      100.0 * tb / us / 1e6 / copy_tbps, us_q, 100.0 * tb / us_q / 1e6 / copy_q_tbps);
        }
      }
      for (int lanes : {2}) {  // 16 elements per lane (two 8-byte chunks): fewer shuffles/token
        if (tc16_only) break;
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
  FOLIO_ASSERT_OK(synchronize());
}

}  // namespace
}  // namespace folio::cuda
