// Decode attention over B1-like context lengths, run only when FOLIO_CUDA_BENCH=1 (prints
// figures, asserts nothing about speed). Session 41's stage times put B1's attention at ~51-55% of
// the copy rate, against 90% in B2's long, equal contexts; this times one decode step's attention
// alone: S sequences drawn from bench/workloads/sharegpt_like_1000.jsonl, each at a uniform point
// of its output (context = prompt + t, t in [1, output_len]); the same rows longest first (what
// FOLIO_DECODE_ROWS=longest-first makes the scheduler emit); and the same tokens as S equal
// contexts. bf16, head_dim 128, 32 q / 8 KV heads, page 16, the eager planner's default plan,
// queued behind an L2 eviction (attention_bench_util.h's method).
#include <functional>
#include <fstream>

#include "attention_bench_util.h"

namespace folio::cuda {
namespace {

using namespace attention_bench;  // NOLINT: the benchmarks' own helpers

struct Lengths {
  int input = 0, output = 0;
};

// The workload's (input_len, output_len) pairs; empty if the file cannot be read.
std::vector<Lengths> b1_workload() {
  std::ifstream in(std::string(FOLIO_SOURCE_DIR) + "/bench/workloads/sharegpt_like_1000.jsonl");
  std::vector<Lengths> out;
  std::string line;
  while (std::getline(in, line)) {
    Lengths l;
    if (std::sscanf(line.c_str(), "{\"input_len\": %d, \"output_len\": %d}", &l.input,
                    &l.output) == 2 &&
        l.input > 0 && l.output > 0)
      out.push_back(l);
  }
  return out;
}

TEST(AttentionBench, K1UnevenContexts) {
  FOLIO_REQUIRE_GPU();
  if (!bench_enabled()) GTEST_SKIP() << "set FOLIO_CUDA_BENCH=1 to time the attention kernels";
  if (!k2_kernel_filter().empty()) GTEST_SKIP() << "FOLIO_BENCH_K2_KERNELS is set: K2 only";
  auto info = device_info();
  ASSERT_TRUE(info.ok());
  const std::vector<Lengths> work = b1_workload();
  ASSERT_EQ(work.size(), 1000u) << "bench/workloads/sharegpt_like_1000.jsonl";
  constexpr int kPage = 16, kMaxSeqs = 1000;
  int longest = 0;
  for (const Lengths& l : work) longest = std::max(longest, l.input + l.output);
  const size_t slots = size_t{kMaxSeqs} * static_cast<size_t>(longest + kPage);
  AttentionBuffers buf(slots, kMaxSeqs);
  ASSERT_TRUE(buf.ok());
  std::mt19937 rng(41);
  buf.fill(rng);
  const size_t slot_bytes = size_t{kKvHeads} * kDim * 2;
  const L2Evictor evictor;
  ASSERT_TRUE(evictor.ok());
  const std::function<void()> evict_l2 = evictor.before();
  const double copy_q_tbps = print_device_and_copy_rate(*info, buf, evict_l2, rng);

  // One step's attention over `lens`: the default plan, queued; prints and returns the us.
  auto time_lens = [&](const char* what, const std::vector<int>& lens) {
    Batch b = make_batch_lens(lens, 1, kPage, rng);
    auto p = params(b, kPage, buf.q->data(), buf.kc->data(), buf.vc->data(), buf.out->data());
    auto plan = plan_decode_attention(b.ctx, kHeads, kKvHeads, kDim, info->num_sms, 0,
                                      DecodeKernel::kDefault,
                                      DecodeCacheFormat{kPage, false, info->peak_memory_gbps});
    EXPECT_TRUE(plan.ok()) << plan.status().to_string();
    if (!plan.ok()) return 0.0;
    auto ws = DeviceBuffer::allocate(plan->workspace_bytes);
    EXPECT_TRUE(ws.ok());
    Status st;
    const double us =
        median_us([&] { st = decode_attention(p, *plan, ws->data(), nullptr); }, evict_l2);
    EXPECT_TRUE(st.ok()) << st.to_string();
    double tokens = 0;
    for (int len : lens) tokens += len;
    const double tbps = 2.0 * tokens * static_cast<double>(slot_bytes) / us / 1e6;
    std::printf("K1 uneven b%zu %s: %.1f us, %.2f TB/s = %.0f%% of queued copy (%s, partition %d "
                "x %d)\n",
                lens.size(), what, us, tbps, 100.0 * tbps / copy_q_tbps,
                plan->kernel == DecodeKernel::kTc ? "tc" : "v2", plan->partition_size,
                plan->max_partitions);
    return us;
  };
  for (int seats : {256, kMaxSeqs}) {
    std::vector<int> lens;
    std::uniform_int_distribution<size_t> pick(0, work.size() - 1);
    for (int s = 0; s < seats; ++s) {
      const Lengths& l = work[pick(rng)];
      lens.push_back(l.input + std::uniform_int_distribution<int>(1, l.output)(rng));
    }
    int64_t total = 0;
    for (int len : lens) total += len;
    const int mean = static_cast<int>((total + seats / 2) / seats);
    const int lo = *std::min_element(lens.begin(), lens.end());
    const int hi = *std::max_element(lens.begin(), lens.end());
    std::printf("K1 uneven b%d: contexts %d..%d, mean %d\n", seats, lo, hi, mean);
    time_lens("B1-like", lens);
    // The rows as FOLIO_DECODE_ROWS=longest-first orders them (SchedulerConfig::
    // decode_rows_longest_first): the blocks of long contexts dispatched first.
    std::vector<int> sorted = lens;
    std::stable_sort(sorted.begin(), sorted.end(), std::greater<int>());
    time_lens("B1-like, longest first", sorted);
    time_lens("equal (the mean)", std::vector<int>(static_cast<size_t>(seats), mean));
  }
}

}  // namespace
}  // namespace folio::cuda
