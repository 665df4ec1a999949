// Decode attention when rows share a prefix, run only when FOLIO_CUDA_BENCH=1 (prints figures,
// asserts nothing about speed). With prefix caching, requests that start with the same system
// prompt hold the same physical blocks for it (bench/workloads/shared_prefix_*.jsonl:
// tests/sched's SharedPrefixSimBench models their decode reading 78.9 TB of KV where each shared
// block read once per step would be 9.6-13.8 TB). The decode kernel reads every row's whole
// context, so what a shared block costs depends on whether L2 serves the rows after the first.
// This times one decode step of S rows of 2048 shared + 256 own tokens: every row's blocks its
// own (the bytes really read), groups of 16 rows sharing a prefix (64 x 16's case) in a shuffled
// order and contiguous, and all rows sharing one. bf16, head_dim 128, 32 q / 8 KV heads, page 16,
// the eager planner's default plan, queued behind an L2 eviction (attention_bench_util.h).
#include <chrono>
#include <functional>

#include "attention_bench_util.h"
#include "backend/cascade_plan.h"
#include "backend/cuda/cascade_attention.h"

namespace folio::cuda {
namespace {

using namespace attention_bench;  // NOLINT: the benchmarks' own helpers

constexpr int kPage = 16, kPrefix = 2048, kOwn = 256, kCtx = kPrefix + kOwn;

// S rows of kCtx tokens; row r belongs to group group_of[r] (-1: no sharing) and the rows of a
// group hold the same physical blocks for their first kPrefix tokens. Returns the batch and the
// number of distinct blocks it reads.
Batch shared_batch(const std::vector<int>& group_of, std::mt19937& rng, size_t* distinct) {
  constexpr int kPrefixBlocks = kPrefix / kPage, kOwnBlocks = kOwn / kPage;
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
  const double copy_q_tbps = copy_rate_1gib(buf.vc->data(), buf.kc->data(), evict_l2).tbps;
  std::printf("device: %s, %d SMs; queued copy %.2f TB/s (read + write)\n", info->name.c_str(),
              info->num_sms, copy_q_tbps);
  buf.fill(rng);  // after the copy that overwrote V

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
      CascadeOptions o;
      o.max_rows_per_item = cascade_max_rows_per_item(kHeads, kKvHeads);
      const auto h0 = std::chrono::steady_clock::now();
      CascadePlan cp = plan_cascade(b.ctx, b.bts, b.bt, kPage, o);
      while (static_cast<int64_t>(cp.items.size()) * kKvHeads < 2 * info->num_sms &&
             o.max_tokens_per_item > 128) {  // as the executor does (cuda_llama_cascade.cc)
        o.max_tokens_per_item /= 2;
        cp = plan_cascade(b.ctx, b.bts, b.bt, kPage, o);
      }
      const double plan_us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - h0).count();
      DeviceBuffer items = testing::upload_raw(cp.items), prow = testing::upload_raw(cp.rows),
                   rss = testing::upload_raw(cp.row_slot_start),
                   rs = testing::upload_raw(cp.row_slots);
      auto cws = DeviceBuffer::allocate(cascade_workspace_bytes(cp.num_slots, kHeads, kDim));
      ASSERT_TRUE(cws.ok());
      CascadeDevicePlan dp;
      dp.items = static_cast<const CascadeItem*>(items.data());
      dp.num_items = static_cast<int>(cp.items.size());
      dp.rows = prow.as<int32_t>();
      dp.row_slot_start = rss.as<int32_t>();
      dp.row_slots = rs.as<int32_t>();
      dp.num_slots = cp.num_slots;
      const double cus =
          median_us([&] { st = cascade_attention(p, dp, cws->data(), nullptr); }, evict_l2);
      ASSERT_TRUE(st.ok()) << st.to_string();
      std::printf(
          "  cascade: %.1f us (%.2fx the default plan), %zu items, %d shared segments, "
          "saving %.0f%% of the reads, %d slots; plan %.0f us on the host\n",
          cus, us / cus, cp.items.size(), cp.num_segments, 100.0 * cp.saving(), cp.num_slots,
          plan_us);
    };
    std::vector<int> none(static_cast<size_t>(rows), -1);
    time_groups("no sharing", none);
    std::vector<int> sixteen(static_cast<size_t>(rows));
    for (int r = 0; r < rows; ++r) sixteen[static_cast<size_t>(r)] = r / 16;
    time_groups("groups of 16, contiguous", sixteen);
    std::shuffle(sixteen.begin(), sixteen.end(), rng);
    time_groups("groups of 16, shuffled", sixteen);
    time_groups("one shared prefix", std::vector<int>(static_cast<size_t>(rows), 0));
  }
}

}  // namespace
}  // namespace folio::cuda
