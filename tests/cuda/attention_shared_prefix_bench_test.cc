// Decode attention when rows share a prefix, run only when FOLIO_CUDA_BENCH=1 (prints figures,
// asserts nothing about speed). With prefix caching, requests that start with the same system
// prompt hold the same physical blocks for it (bench/workloads/shared_prefix_*.jsonl:
// tests/sched's SharedPrefixSimBench models their decode reading 78.9 TB of KV where each shared
// block read once per step would be 9.6-13.8 TB). The decode kernel reads every row's whole
// context, so what a shared block costs depends on whether L2 serves the rows after the first.
// This times one decode step of S rows of 2048 shared + 256 own tokens: every row's blocks its
// own (the bytes really read), groups of 16 rows sharing a prefix (64 x 16's case) in a shuffled
// order and contiguous, all rows sharing one, and groups of 4 (n = 4 samples of each prompt:
// items of 4 rows, packed on the wgmma kernel since session 49). bf16, head_dim 128, 32 q / 8 KV
// heads, page 16, the eager planner's default plan, queued behind an L2 eviction
// (attention_bench_util.h); then both again over an fp8 e4m3 cache.
#include <chrono>
#include <cstdlib>
#include <functional>

#include "attention_bench_util.h"
#include "backend/cascade_plan.h"
#include "backend/cuda/cascade_attention.h"
#include "cascade_test_util.h"

namespace folio::cuda {
namespace {

using namespace attention_bench;  // NOLINT: the benchmarks' own helpers

constexpr int kPage = 16;

// An integer from the environment (whole pages), else `fallback`.
int env_tokens(const char* name, int fallback) {
  const char* e = std::getenv(name);
  const int v = e != nullptr ? std::atoi(e) : fallback;
  return v >= 0 ? v / kPage * kPage : fallback;
}

// The shape: FOLIO_BENCH_SHARED_PREFIX and FOLIO_BENCH_SHARED_OWN tokens (default 2048 + 256;
// prefix 0 with the "no sharing" rows times what a step's own suffixes alone cost).
const int kPrefix = env_tokens("FOLIO_BENCH_SHARED_PREFIX", 2048);
const int kOwn = std::max(kPage, env_tokens("FOLIO_BENCH_SHARED_OWN", 256));
const int kCtx = kPrefix + kOwn;

// S rows of kCtx tokens; row r belongs to group group_of[r] (-1: no sharing) and the rows of a
// group hold the same physical blocks for their first kPrefix tokens. Returns the batch and the
// number of distinct blocks it reads.
Batch shared_batch(const std::vector<int>& group_of, std::mt19937& rng, size_t* distinct) {
  const int kPrefixBlocks = kPrefix / kPage, kOwnBlocks = kOwn / kPage;
  int groups = 0;
  for (int g : group_of) groups = std::max(groups, g + 1);
  const size_t rows = group_of.size();
  size_t total = static_cast<size_t>(groups) * kPrefixBlocks;
  for (int g : group_of) total += g < 0 ? kPrefixBlocks + kOwnBlocks : kOwnBlocks;
  std::vector<int32_t> phys(total);
  std::iota(phys.begin(), phys.end(), 0);
  std::shuffle(phys.begin(), phys.end(), rng);
  size_t at = static_cast<size_t>(groups) * kPrefixBlocks;  // the groups' prefixes come first
  Batch b;
  for (size_t r = 0; r < rows; ++r) {
    const int g = group_of[r];
    if (g >= 0) {
      auto p = phys.begin() + static_cast<ptrdiff_t>(g) * kPrefixBlocks;
      b.bt.insert(b.bt.end(), p, p + kPrefixBlocks);
    } else {
      b.bt.insert(b.bt.end(), phys.begin() + at, phys.begin() + at + kPrefixBlocks);
      at += kPrefixBlocks;
    }
    b.bt.insert(b.bt.end(), phys.begin() + at, phys.begin() + at + kOwnBlocks);
    at += kOwnBlocks;
    b.qs.push_back(b.qs.back() + 1);
    b.ctx.push_back(kCtx);
    b.bts.push_back(static_cast<int32_t>(b.bt.size()));
  }
  *distinct = total;
  upload(b);
  return b;
}

TEST(AttentionBench, K1SharedPrefix) {
  FOLIO_REQUIRE_GPU();
  if (!bench_enabled()) GTEST_SKIP() << "set FOLIO_CUDA_BENCH=1 to time the attention kernels";
  if (!k2_kernel_filter().empty()) GTEST_SKIP() << "FOLIO_BENCH_K2_KERNELS is set: K2 only";
  auto info = device_info();
  ASSERT_TRUE(info.ok());
  constexpr int kMaxRows = 1024;
  const size_t slots = size_t{kMaxRows} * (kCtx + kPage);
  AttentionBuffers buf(slots, kMaxRows);
  ASSERT_TRUE(buf.ok());
  std::mt19937 rng(45);
  buf.fill(rng);
  const size_t slot_bytes = size_t{kKvHeads} * kDim * 2;  // K or V of one token, one layer
  const L2Evictor evictor;
  ASSERT_TRUE(evictor.ok());
  const std::function<void()> evict_l2 = evictor.before();
  const double copy_q_tbps = print_device_and_copy_rate(*info, buf, evict_l2, rng);
  // The fp8 caches: one byte per element.
  auto kc8 = DeviceBuffer::allocate(slots * slot_bytes / 2);
  auto vc8 = DeviceBuffer::allocate(slots * slot_bytes / 2);
  ASSERT_TRUE(kc8.ok() && vc8.ok());
  fill_random_fp8(kc8->data(), kc8->bytes(), rng);
  fill_random_fp8(vc8->data(), vc8->bytes(), rng);

  for (int rows : {32, 256, kMaxRows}) {
    auto time_groups = [&](const char* what, const std::vector<int>& group_of) {
      size_t distinct = 0;
      Batch b = shared_batch(group_of, rng, &distinct);
      auto p = params(b, kPage, buf.q->data(), buf.kc->data(), buf.vc->data(), buf.out->data());
      auto plan = plan_decode_attention(b.ctx, kHeads, kKvHeads, kDim, info->num_sms, 0,
                                        DecodeKernel::kDefault,
                                        DecodeCacheFormat{kPage, false, info->peak_memory_gbps});
      ASSERT_TRUE(plan.ok()) << plan.status().to_string();
      auto ws = DeviceBuffer::allocate(plan->workspace_bytes);
      ASSERT_TRUE(ws.ok());
      Status st;
      const double us =
          median_us([&] { st = decode_attention(p, *plan, ws->data(), nullptr); }, evict_l2);
      ASSERT_TRUE(st.ok()) << st.to_string();
      // Logical: every row's context; distinct: each block once (the least a step reads).
      const double logical = 2.0 * rows * kCtx * static_cast<double>(slot_bytes);
      const double once = 2.0 * static_cast<double>(distinct) * kPage * slot_bytes;
      std::printf(
          "K1 shared b%d x %d (%s): %.1f us; logical %.2f TB/s = %.0f%% of queued copy; "
          "distinct blocks %.2f TB/s = %.0f%%; a step reading each block once at the "
          "copy rate: %.1f us\n",
          rows, kCtx, what, us, logical / us / 1e6, 100.0 * logical / us / 1e6 / copy_q_tbps,
          once / us / 1e6, 100.0 * once / us / 1e6 / copy_q_tbps, once / (copy_q_tbps * 1e6));
      // The cascade form (cascade_attention.h) on the same batch: the plan's host time, then
      // both kernels (partials and merge), queued the same way.
      CascadeOptions o;  // as the executor's (cuda_llama_cascade.cc)
      o.max_rows_per_item = cascade_max_rows_per_item(kHeads, kKvHeads);
      o.min_items = cascade_min_items(kKvHeads, info->num_sms);
      o.wide_min_rows = cascade_wide_min_rows(p);
      const auto h0 = std::chrono::steady_clock::now();
      const CascadePlan cp = plan_cascade(b.ctx, b.bts, b.bt, kPage, o);
      const double plan_us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - h0).count();
      testing::CascadeDeviceCopy dev(cp, kHeads, kKvHeads, kDim);
      std::printf(
          "  cascade: %zu items (%d wide), %d shared segments, saving %.0f%% of the reads, %d "
          "slots; plan %.0f us on the host\n",
          cp.items.size(), cp.num_wide_items, cp.num_segments, 100.0 * cp.saving(), cp.num_slots,
          plan_us);
      // Both cascade kernels on a device copy of a plan, queued like the rest; the status in st.
      auto time_cascade = [&](const testing::CascadeDeviceCopy& d, CascadeTuning t = {}) {
        return median_us([&] { st = cascade_attention(p, d.view, d.workspace.data(), nullptr, t); },
                         evict_l2);
      };
      const double dus = time_cascade(dev);
      ASSERT_TRUE(st.ok()) << st.to_string();
      std::printf(
          "  cascade (the default: wide items alone, the others packed, on wgmma): %.1f us "
          "(%.2fx the default plan)\n",
          dus, us / dus);
      std::printf("  (%d items packed, %s to a pack, in %d packs)\n",
                  dev.packs.empty() ? 0 : static_cast<int>(cp.items.size()) - dev.packs.front(),
                  dev.pack_sizes().c_str(), dev.host_counts.num_packs);
      {
        CascadeTuning t;
        t.wgmma_stages = 3;
        const double cus = time_cascade(dev, t);
        ASSERT_TRUE(st.ok()) << st.to_string();
        std::printf(
            "  cascade, wgmma 3 stages, 2 blocks per SM: %.1f us (%.2fx the default plan)\n", cus,
            us / cus);
      }
      {  // Before session 49: only the one-row items packed, items of 2-8 rows on mma.sync.
        testing::CascadeDeviceCopy odev(cp, kHeads, kKvHeads, kDim, 0, true);
        const double cus = time_cascade(odev);
        ASSERT_TRUE(st.ok()) << st.to_string();
        std::printf(
            "  cascade, one-row items packed (%s to a pack), the rest on mma.sync: %.1f us (%.2fx "
            "the default plan)\n",
            odev.pack_sizes().c_str(), cus, us / cus);
      }
      for (int pack : {-1, 1, 2, 4, 8, 16}) {
        testing::CascadeDeviceCopy pdev(cp, kHeads, kKvHeads, kDim, pack);
        const double cus = time_cascade(pdev);
        ASSERT_TRUE(st.ok()) << st.to_string();
        if (pack < 0)
          std::printf("  cascade, narrow items on mma.sync: %.1f us (%.2fx the default plan)\n",
                      cus, us / cus);
        else
          std::printf(
              "  cascade, narrow items at most %d to a pack (%s): %.1f us (%.2fx the default "
              "plan)\n",
              pack, pdev.pack_sizes().c_str(), cus, us / cus);
      }
      // Every item on the mma.sync kernel, in its load forms.
      CascadeOptions narrow = o;
      narrow.wide_min_rows = 0;
      testing::CascadeDeviceCopy ndev(plan_cascade(b.ctx, b.bts, b.bt, kPage, narrow), kHeads,
                                      kKvHeads, kDim, -1);
      for (CascadeTuning t : {CascadeTuning{}, CascadeTuning{CascadeLoad::kCpAsync, true},
                              CascadeTuning{CascadeLoad::kBulkRows, false}}) {
        const double cus = time_cascade(ndev, t);
        ASSERT_TRUE(st.ok()) << st.to_string();
        std::printf("  cascade, all on mma.sync, %s, %s keys: %.1f us (%.2fx the default plan)\n",
                    t.load == CascadeLoad::kBulkRows ? "bulk rows" : "cp.async",
                    t.split_keys ? "split" : "unsplit", cus, us / cus);
      }
      // Every item on wgmma: items of 2+ rows alone and one-row items packed (the launch's
      // choice); every item alone.
      for (int wide_rows : {2, 1}) {
        if (o.wide_min_rows == 0) break;
        CascadeOptions wo = o;
        wo.wide_min_rows = wide_rows;
        testing::CascadeDeviceCopy wdev(plan_cascade(b.ctx, b.bts, b.bt, kPage, wo), kHeads,
                                        kKvHeads, kDim);
        const double cus = time_cascade(wdev);
        ASSERT_TRUE(st.ok()) << st.to_string();
        std::printf("  cascade, all on wgmma, %s: %.1f us (%.2fx the default plan)\n",
                    wide_rows == 2 ? "one-row items packed (auto)" : "every item alone", cus,
                    us / cus);
      }
      {  // An fp8 cache: the per-row kernel's default plan against cascade's default.
        PagedAttentionParams p8 = p;
        p8.kv_dtype = KvCacheDtype::kFp8E4m3;
        p8.k_cache = kc8->data();
        p8.v_cache = vc8->data();
        auto plan8 = plan_decode_attention(b.ctx, kHeads, kKvHeads, kDim, info->num_sms, 0,
                                           DecodeKernel::kDefault,
                                           DecodeCacheFormat{kPage, true, info->peak_memory_gbps});
        ASSERT_TRUE(plan8.ok()) << plan8.status().to_string();
        auto ws8 = DeviceBuffer::allocate(plan8->workspace_bytes);
        ASSERT_TRUE(ws8.ok());
        const double rus =
            median_us([&] { st = decode_attention(p8, *plan8, ws8->data(), nullptr); }, evict_l2);
        ASSERT_TRUE(st.ok()) << st.to_string();
        double cus[3];  // the wgmma kernel's 2, 3 and 4 fp8 stages
        for (int stages : {2, 3, 4}) {
          CascadeTuning t;
          t.wgmma_stages = stages;
          cus[stages - 2] = median_us(
              [&] { st = cascade_attention(p8, dev.view, dev.workspace.data(), nullptr, t); },
              evict_l2);
          ASSERT_TRUE(st.ok()) << st.to_string();
        }
        std::printf(
            "  fp8 cache: per-row kernel %.1f us, cascade %.1f us (%.2fx), 3 / 4 stages %.1f / "
            "%.1f us; each block once at the copy rate: %.1f us\n",
            rus, cus[0], rus / cus[0], cus[1], cus[2], once / 2 / (copy_q_tbps * 1e6));
      }
      // Fewer rows per item: each item's tile work is split over more warps (cascade_attention.cu),
      // and a shared range is read once per item (L2 may serve the repeats).
      for (int max_rows : {8, 4}) {
        CascadeOptions fewer = o;
        fewer.max_rows_per_item = max_rows;
        const CascadePlan fp = plan_cascade(b.ctx, b.bts, b.bt, kPage, fewer);
        testing::CascadeDeviceCopy fdev(fp, kHeads, kKvHeads, kDim);
        const double cus = time_cascade(fdev);
        ASSERT_TRUE(st.ok()) << st.to_string();
        std::printf(
            "  cascade, at most %d rows per item: %.1f us (%.2fx the default plan), %zu "
            "items, saving %.0f%% of the reads\n",
            max_rows, cus, us / cus, fp.items.size(), 100.0 * fp.saving());
      }
    };
    std::vector<int> none(static_cast<size_t>(rows), -1);
    time_groups("no sharing", none);
    if (kPrefix == 0) continue;  // nothing to share
    std::vector<int> sixteen(static_cast<size_t>(rows));
    for (int r = 0; r < rows; ++r) sixteen[static_cast<size_t>(r)] = r / 16;
    time_groups("groups of 16, contiguous", sixteen);
    std::shuffle(sixteen.begin(), sixteen.end(), rng);
    time_groups("groups of 16, shuffled", sixteen);
    time_groups("one shared prefix", std::vector<int>(static_cast<size_t>(rows), 0));
    std::vector<int> four(static_cast<size_t>(rows));  // n = 4 samples of each prompt
    for (int r = 0; r < rows; ++r) four[static_cast<size_t>(r)] = r / 4;
    time_groups("groups of 4, contiguous", four);
  }
}

}  // namespace
}  // namespace folio::cuda
