// Where a decode tc launch spends its time, block by block: with a measuring build
// (cmake -DFOLIO_KERNEL_TRACE=ON, kernel_trace.cuh) and FOLIO_CUDA_BENCH=1, each K1 shape below
// runs queued (behind the L2 eviction, as AttentionBench times it) with every block stamping
// %globaltimer at its entry, its first slot and q, each warp's first chunk and loop end, the
// partials' barrier and its end. Prints percentiles over the blocks; with OUT set, writes
// OUT/tc-trace-b<batch>-L<context>.csv (one row per block, ns from the first entry). Skips in
// other builds. Findings: src/backend/cuda/NOTES.md, "K1, session 21".
#include "attention_bench_util.h"
#include "backend/cuda/decode_attention_impl.h"

namespace folio::cuda {
namespace {

using namespace attention_bench;  // NOLINT: the benchmarks' own helpers

constexpr int kWords = detail::kTcTraceWords;

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1))];
}

void print_row(const char* what, const std::vector<double>& v) {
  std::printf("  %-28s min %7.2f p10 %7.2f p50 %7.2f p90 %7.2f max %7.2f us\n", what,
              percentile(v, 0), percentile(v, 0.1), percentile(v, 0.5), percentile(v, 0.9),
              percentile(v, 1.0));
}

// The first block's entry: the records' time origin.
unsigned long long first_entry(const std::vector<unsigned long long>& h, int blocks) {
  unsigned long long t0 = ~0ull;
  for (int b = 0; b < blocks; ++b) t0 = std::min(t0, h[b * kWords]);
  return t0;
}

// Per block: the words decode_attention_tc.cuh stamps (0 entry, 1 SM, 2-5 warp loop ends,
// 6 warp 0's first chunk, 7 end, 8 first slot, 9 q, 10 barrier), as microseconds.
void summarize(const std::vector<unsigned long long>& h, int blocks) {
  const unsigned long long t0 = first_entry(h, blocks);
  std::vector<double> entry, slot, q, first, loop_end, warp_spread, barrier, epilogue, end;
  for (int b = 0; b < blocks; ++b) {
    const unsigned long long* r = &h[b * kWords];
    const unsigned long long lo = *std::min_element(r + 2, r + 6);
    const unsigned long long hi = *std::max_element(r + 2, r + 6);
    entry.push_back((r[0] - t0) / 1e3);
    slot.push_back((r[8] - r[0]) / 1e3);
    q.push_back((r[9] - r[0]) / 1e3);
    first.push_back((r[6] - r[0]) / 1e3);
    loop_end.push_back((hi - t0) / 1e3);
    warp_spread.push_back((hi - lo) / 1e3);
    barrier.push_back((r[10] - hi) / 1e3);
    epilogue.push_back((r[7] - hi) / 1e3);
    end.push_back((r[7] - t0) / 1e3);
  }
  print_row("entry", entry);
  print_row("first slot - entry", slot);
  print_row("q ready - entry", q);
  print_row("first chunk done - entry", first);
  print_row("last warp's loop end", loop_end);
  print_row("warp loop end spread", warp_spread);
  print_row("barrier - last loop end", barrier);
  print_row("end - last loop end", epilogue);
  print_row("end", end);
}

void write_csv(const std::vector<unsigned long long>& h, int blocks, int batch, int ctx) {
  const char* dir = std::getenv("OUT");
  if (dir == nullptr) return;
  const std::string path = std::string(dir) + "/tc-trace-b" + std::to_string(batch) + "-L" +
                           std::to_string(ctx) + ".csv";
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return;
  const unsigned long long t0 = first_entry(h, blocks);
  std::fprintf(f, "block,sm,entry,warp0_end,warp1_end,warp2_end,warp3_end,first,end,slot,q,"
                  "barrier\n");
  for (int b = 0; b < blocks; ++b) {
    const unsigned long long* r = &h[b * kWords];
    std::fprintf(f, "%d,%llu", b, r[1]);
    for (int w : {0, 2, 3, 4, 5, 6, 7, 8, 9, 10}) std::fprintf(f, ",%llu", r[w] - t0);
    std::fprintf(f, "\n");
  }
  std::fclose(f);
}

TEST(TcTraceBench, K1) {
  FOLIO_REQUIRE_GPU();
  if (!bench_enabled()) GTEST_SKIP() << "set FOLIO_CUDA_BENCH=1 to trace the decode kernel";
  if (!detail::set_tc_trace(nullptr)) GTEST_SKIP() << "built without FOLIO_KERNEL_TRACE";
  auto info = device_info();
  ASSERT_TRUE(info.ok());
  std::mt19937 rng(3);
  const size_t slot_bytes = size_t{kKvHeads} * kDim * 2;
  AttentionBuffers buf(size_t{128} * 8192, 128);  // the largest shape below
  ASSERT_TRUE(buf.ok());
  buf.fill(rng);
  const L2Evictor evictor;
  ASSERT_TRUE(evictor.ok());
  const std::function<void()> evict_l2 = evictor.before();
  struct Shape {
    int batch, ctx;
  };
  for (Shape c : {Shape{32, 2048}, Shape{128, 8192}}) {
    Batch b = make_batch(c.batch, c.ctx, 1, 16, rng);
    auto p = params(b, 16, buf.q->data(), buf.kc->data(), buf.vc->data(), buf.out->data());
    auto plan = plan_decode_attention(b.ctx, kHeads, kKvHeads, kDim, info->num_sms, 0,
                                      DecodeKernel::kTc, DecodeCacheFormat{16, false});
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    auto ws = DeviceBuffer::allocate(plan->workspace_bytes);
    ASSERT_TRUE(ws.ok());
    const double bytes = 2.0 * c.batch * c.ctx * slot_bytes;
    const double us = median_us([&] { (void)decode_attention(p, *plan, ws->data(), nullptr); },
                                evict_l2);
    const int blocks = kKvHeads * c.batch * plan->max_partitions;
    auto words = DeviceBuffer::allocate(size_t{8} * kWords * blocks);
    ASSERT_TRUE(words.ok());
    for (int rep = 0; rep < 3; ++rep) {
      ASSERT_TRUE(detail::set_tc_trace(words->as<unsigned long long>()));
      evict_l2();
      const double traced_us = median_us(
          [&] { (void)decode_attention(p, *plan, ws->data(), nullptr); }, evict_l2);
      ASSERT_TRUE(detail::set_tc_trace(nullptr));
      std::vector<unsigned long long> h(size_t{kWords} * blocks);
      ASSERT_TRUE(copy(h.data(), words->data(), h.size() * 8).ok());  // the last launch's
      std::printf("TRACE b%d L%d rep %d: queued %.1f us untraced (%.2f TB/s), %.1f traced; %d "
                  "blocks\n", c.batch, c.ctx, rep, us, bytes / us / 1e6, traced_us, blocks);
      summarize(h, blocks);
      if (rep == 0) write_csv(h, blocks, c.batch, c.ctx);
    }
  }
}

}  // namespace
}  // namespace folio::cuda
